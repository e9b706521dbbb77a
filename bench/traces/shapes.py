# SPDX-License-Identifier: Apache-2.0
"""Request streams of the synthetic traces.

A trace is one or more volumes; each volume is a :class:`Profile`: a
foreground stream (Poisson arrivals, zipf-like reuse over a hot set that may
drift, plus one-off reads spread over the whole volume) and, optionally, a
periodic backup scan (a sequential read of a large region, once per
``scan_period`` seconds of trace time).  Streams are produced in chunks of
numpy arrays and merged by time, so a trace of any length is written
without being held in memory.

A chunk is a structured array of :data:`REQ_DTYPE`: ``t`` (seconds since
the trace start), ``vol`` (index in the trace's volume list), ``op``
(:data:`OP_READ` or :data:`OP_WRITE`), ``block`` (the first block) and
``nblk`` (length in blocks).
"""

import math

import numpy as np

OP_READ = 0
OP_WRITE = 1

REQ_DTYPE = np.dtype([('t', '<f8'), ('vol', '<u2'), ('op', 'u1'),
                      ('block', '<i8'), ('nblk', '<i4')])

DAY = 86400.0
CHUNK = 1 << 16

SHAPES = ('zipf', 'drift', 'scan', 'mix')


class Profile(object):
    """One volume's workload.

    requests: foreground requests (exactly this many, spread over
    ``duration`` seconds with exponential gaps); hot_blocks: the hot set,
    whose block of rank r (1 = hottest) is accessed with probability
    proportional to 1 / r ** zipf_alpha; cold_fraction: share of foreground
    requests that go to a uniformly random block of the volume instead;
    req_blocks: mean request length in blocks (geometric; 1 = all single
    blocks); drift_period: seconds for the hot set to slide by its whole
    size (0 = it stays put); scan_period: seconds between backup scans
    (0 = none), each a sequential read of scan_blocks blocks from
    scan_start in requests of scan_req_blocks blocks lasting scan_seconds,
    the first at scan_offset.
    """

    def __init__(self, name, requests, duration, volume_blocks=1 << 20,
                 hot_blocks=1 << 15, hot_base=None, zipf_alpha=0.9,
                 cold_fraction=0.2, write_fraction=0.3, req_blocks=1.0,
                 drift_period=0.0, scan_period=0.0, scan_offset=None,
                 scan_blocks=None, scan_start=0, scan_req_blocks=32,
                 scan_seconds=7200.0):
        if requests < 0 or duration <= 0:
            raise ValueError('%s: requests >= 0 and duration > 0' % name)
        if not 0 < hot_blocks <= volume_blocks:
            raise ValueError('%s: 0 < hot_blocks <= volume_blocks' % name)
        if req_blocks < 1:
            raise ValueError('%s: req_blocks must be >= 1' % name)
        self.name = name
        self.requests = int(requests)
        self.duration = float(duration)
        self.volume_blocks = int(volume_blocks)
        self.hot_blocks = int(hot_blocks)
        if hot_base is None:
            hot_base = (self.volume_blocks - self.hot_blocks) // 2
        self.hot_base = int(hot_base)
        self.zipf_alpha = float(zipf_alpha)
        self.cold_fraction = float(cold_fraction)
        self.write_fraction = float(write_fraction)
        self.req_blocks = float(req_blocks)
        self.drift_period = float(drift_period)
        self.scan_period = float(scan_period)
        if scan_offset is None:
            scan_offset = 0.75 * scan_period
        self.scan_offset = float(scan_offset)
        if scan_blocks is None:
            scan_blocks = self.volume_blocks // 4
        self.scan_blocks = int(min(scan_blocks,
                                   self.volume_blocks - scan_start))
        self.scan_start = int(scan_start)
        self.scan_req_blocks = int(scan_req_blocks)
        self.scan_seconds = float(scan_seconds)

    def describe(self):
        return dict(self.__dict__)

    def scan_times(self):
        """Start times of the backup scans within the trace."""
        if self.scan_period <= 0 or self.scan_blocks <= 0:
            return []
        out = []
        t = self.scan_offset
        while t < self.duration:
            out.append(t)
            t += self.scan_period
        return out


def hot_slot_block(profile, slots, times):
    """The block that hot-set slot ``slots`` is at, at ``times``.

    Slot s of H lives in the window [base, base + H) at the one block
    congruent to s modulo H, where base grows by H every drift_period: as
    the window slides one block, one slot moves from the window's first
    block to the block just past its end and keeps its popularity, so the
    hot set changes gradually.
    """
    h = profile.hot_blocks
    if profile.drift_period > 0:
        base = np.floor(times * (h / profile.drift_period)).astype(np.int64)
    else:
        base = np.zeros(len(slots), dtype=np.int64)
    block = profile.hot_base + base + np.mod(slots - base, h)
    return np.mod(block, profile.volume_blocks)


def _rank_to_slot(ranks, h):
    # A fixed bijection of [0, h): the hot blocks are spread over the hot
    # window rather than the hottest being adjacent.
    mult = 2654435761 % h if h > 1 else 1
    while math.gcd(mult, h) != 1:
        mult += 1
    return np.mod(ranks * mult + h // 3, h)


def foreground_chunks(profile, vol, rng, chunk=CHUNK):
    """Chunks of the profile's foreground requests, in time order."""
    p = profile
    if p.requests == 0:
        return
    h = p.hot_blocks
    cdf = np.cumsum(1.0 / np.arange(1, h + 1, dtype=np.float64)
                    ** p.zipf_alpha)
    cdf /= cdf[-1]
    mean_gap = p.duration / p.requests
    t = 0.0
    left = p.requests
    while left > 0:
        n = min(chunk, left)
        left -= n
        times = t + np.cumsum(rng.exponential(mean_gap, n))
        t = float(times[-1])
        ranks = np.searchsorted(cdf, rng.random(n), side='right')
        ranks = np.minimum(ranks, h - 1).astype(np.int64)
        block = hot_slot_block(p, _rank_to_slot(ranks, h), times)
        cold = rng.random(n) < p.cold_fraction
        block[cold] = rng.integers(0, p.volume_blocks, int(cold.sum()))
        if p.req_blocks > 1:
            nblk = rng.geometric(1.0 / p.req_blocks, n).astype(np.int64)
        else:
            nblk = np.ones(n, dtype=np.int64)
        nblk = np.minimum(nblk, p.volume_blocks)
        block = np.minimum(block, p.volume_blocks - nblk)
        out = np.empty(n, dtype=REQ_DTYPE)
        out['t'] = times
        out['vol'] = vol
        out['op'] = np.where(rng.random(n) < p.write_fraction,
                             OP_WRITE, OP_READ)
        out['block'] = block
        out['nblk'] = nblk
        yield out


def scan_chunks(profile, vol, chunk=CHUNK):
    """Chunks of the profile's backup scans: sequential reads."""
    p = profile
    step = p.scan_req_blocks
    nreq = -(-p.scan_blocks // step) if p.scan_blocks > 0 else 0
    for start in p.scan_times():
        gap = p.scan_seconds / max(nreq, 1)
        for first in range(0, nreq, chunk):
            idx = np.arange(first, min(first + chunk, nreq), dtype=np.int64)
            out = np.empty(len(idx), dtype=REQ_DTYPE)
            out['t'] = start + idx * gap
            out['vol'] = vol
            out['op'] = OP_READ
            out['block'] = p.scan_start + idx * step
            out['nblk'] = np.minimum(step, p.scan_start + p.scan_blocks
                                     - out['block'])
            yield out


def merge(streams):
    """Merge chunk iterators, each in time order, into one time order.

    Each round emits everything up to the earliest "last time" of the
    streams that still have more to come, so nothing later can precede it.
    """
    iters = [iter(s) for s in streams]
    bufs = [None] * len(iters)
    done = [False] * len(iters)

    def refill(i):
        while not done[i] and (bufs[i] is None or len(bufs[i]) == 0):
            try:
                bufs[i] = next(iters[i])
            except StopIteration:
                done[i] = True
                bufs[i] = None

    for i in range(len(iters)):
        refill(i)
    while True:
        live = [i for i in range(len(iters)) if bufs[i] is not None]
        if not live:
            return
        pending = [bufs[i]['t'][-1] for i in live if not done[i]]
        limit = min(pending) if pending else math.inf
        parts = []
        for i in live:
            b = bufs[i]
            k = int(np.searchsorted(b['t'], limit, side='right'))
            if k:
                parts.append(b[:k])
                bufs[i] = b[k:]
        out = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if len(parts) > 1:
            out = out[np.argsort(out['t'], kind='stable')]
        yield out
        for i in live:
            if bufs[i] is not None and len(bufs[i]) == 0:
                bufs[i] = None
                refill(i)


def profiles_for(shape, requests, duration, volume_blocks=1 << 20,
                 hot_blocks=1 << 15, zipf_alpha=0.9, cold_fraction=0.2,
                 write_fraction=0.3, req_blocks=1.0, drift_period=None,
                 scan_period=7 * DAY, scan_blocks=None, scan_req_blocks=32,
                 scan_seconds=7200.0, scan_offset=None):
    """The volumes of a named shape (see :data:`SHAPES`)."""
    common = dict(duration=duration, volume_blocks=volume_blocks,
                  zipf_alpha=zipf_alpha, cold_fraction=cold_fraction,
                  write_fraction=write_fraction, req_blocks=req_blocks)
    scan = dict(scan_period=scan_period, scan_blocks=scan_blocks,
                scan_req_blocks=scan_req_blocks, scan_seconds=scan_seconds,
                scan_offset=scan_offset)
    if drift_period is None:
        drift_period = duration / 4.0
    if shape == 'zipf':
        return [Profile('vol0', requests, hot_blocks=hot_blocks, **common)]
    if shape == 'drift':
        return [Profile('vol0', requests, hot_blocks=hot_blocks,
                        drift_period=drift_period, **common)]
    if shape == 'scan':
        return [Profile('vol0', requests, hot_blocks=hot_blocks,
                        **dict(common, **scan))]
    if shape == 'mix':
        # Four VMs of different demand and intensity sharing one cache: a
        # web server with a weekly backup, a skewed small database, a
        # drifting working set, and a light VM of mostly one-off reads.
        def part(frac):
            return int(round(requests * frac))
        return [
            Profile('web', part(0.4), hot_blocks=hot_blocks,
                    **dict(common, **scan)),
            Profile('db', part(0.3), hot_blocks=max(1, hot_blocks // 4),
                    **dict(common, zipf_alpha=min(zipf_alpha + 0.3, 1.5),
                           write_fraction=min(write_fraction + 0.2, 1.0))),
            Profile('drift', part(0.2), hot_blocks=hot_blocks // 2 or 1,
                    drift_period=drift_period, **common),
            Profile('light', part(0.1), hot_blocks=max(1, hot_blocks // 8),
                    **dict(common, cold_fraction=max(cold_fraction, 0.5))),
        ]
    raise ValueError('unknown shape %r (one of %s)' % (shape,
                                                       ', '.join(SHAPES)))


def stream(profiles, seed, chunk=CHUNK):
    """The merged request chunks of the given volumes, in time order."""
    seqs = np.random.SeedSequence(seed).spawn(len(profiles))
    streams = []
    for vol, (p, seq) in enumerate(zip(profiles, seqs)):
        rng = np.random.Generator(np.random.PCG64(seq))
        streams.append(foreground_chunks(p, vol, rng, chunk))
        if p.scan_times():
            streams.append(scan_chunks(p, vol, chunk))
    return merge(streams)
