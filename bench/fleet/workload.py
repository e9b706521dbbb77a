# SPDX-License-Identifier: Apache-2.0
"""Per-VM cache demand (RWSS) series for the fleet, from the trace shapes.

The VMs are the four volumes of the trace generator's ``mix`` shape
(:func:`bench.traces.shapes.profiles_for`, imported): ``web`` (the
weekly backup scan), ``db`` (small, skewed, write-heavy), ``drift`` (a
sliding hot set) and ``light`` (mostly one-off reads), with the
generator's own parameters (zipf exponent, hot-set size relative to the
volume, cold fraction, write fraction, request shares 40/30/20/10 %).

The series are *computed from the shape parameters*, not by running the
request streams: 20,000 VMs x 2,016 windows of streams would be 10^11
requests.  The generator's foreground stream is a Poisson process whose
every request picks hot rank r with probability proportional to
1 / r ** alpha (or, with the cold fraction, a uniform block of the whole
volume), independently.  A block that gets probability q therefore
receives Poisson(n q) requests in a window that holds n expected
requests, and the expected RWSS_1 (blocks accessed at least twice: reused
at least once) is exactly::

    E[RWSS_1](n) = sum over blocks of 1 - exp(-n q) (1 + n q)

(for a time-varying rate too: n is then the rate's integral over the
window).  The backup scan reads each block of its region once, in a region
disjoint from the hot set, so by itself it adds nothing to RWSS_1 (the RWS
model's point: the scan peaks the WSS); but a block of the scanned region
that a one-off (cold) read also touched in the same window *is* reused,
so a window that overlaps a scan adds::

    (blocks scanned in the window) x (1 - exp(-n cold / volume blocks))

(:func:`scan_extra`; ``calibrate`` found it: +43 % RWSS_1 for the web
volume in its scan windows at the generator's cold fraction of 0.2).  The
drift moves which blocks are hot, not how many, and slides a hot set by
its size in days, so within an hour's window it changes the expectation
by well under 1 %.  ``python3 -m bench.fleet.calibrate`` checks the formula
against the generator's actual streams (exact per-window RWSS_1 counts).

Ranks are summed in bins (the first ranks one by one, the rest in
log-spaced bins), which keeps the cost independent of the hot set's size.
What the shapes do not have -- a rate that changes over the day and from
day to day, and VM sizes in a fleet -- is added here and marked as such in
:mod:`bench.fleet.constants`.
"""

import numpy as np

from bench.fleet import constants as K
from bench.traces import shapes

ARCHETYPES = ('web', 'db', 'drift', 'light')


def mix_profiles():
    """The generator's ``mix`` volumes at its default parameters."""
    return shapes.profiles_for('mix', requests=1000000,
                               duration=21 * shapes.DAY)


def archetype_params():
    """The archetypes' parameters, read from the generator's profiles.

    Per archetype: alpha, cold fraction, write fraction, hot blocks
    relative to the ``web`` volume's, volume blocks relative to its hot
    blocks, request share.
    """
    profs = {p.name: p for p in mix_profiles()}
    web = profs['web']
    total = float(sum(p.requests for p in profs.values()))
    out = {}
    for name in ARCHETYPES:
        p = profs[name]
        out[name] = dict(alpha=p.zipf_alpha, cold=p.cold_fraction,
                         write=p.write_fraction,
                         hot_rel=p.hot_blocks / float(web.hot_blocks),
                         vol_over_hot=p.volume_blocks / float(p.hot_blocks),
                         share=p.requests / total,
                         scan=p.scan_period > 0,
                         scan_period=p.scan_period,
                         scan_seconds=p.scan_seconds,
                         scan_fraction=p.scan_blocks / float(p.volume_blocks),
                         drift=p.drift_period > 0)
    return out


class RankBins(object):
    """A zipf hot set of ``hot`` blocks in rank bins.

    The cold fraction is spread over a volume of ``volume`` blocks.
    ``count[b]`` blocks in bin b each get access probability ``q[b]``
    (hottest bin first); ``cold_q`` and ``cold_count`` are the volume's
    other blocks.
    """

    def __init__(self, hot, volume, alpha, cold, exact=256, bins=240):
        hot = int(hot)
        volume = max(int(volume), hot)
        edges = np.arange(1, min(exact, hot) + 1, dtype=np.float64)
        if hot > exact:
            tail = np.unique(np.round(np.geomspace(exact + 1, hot + 1,
                                                   bins)).astype(np.int64))
            edges = np.concatenate([edges, tail.astype(np.float64)])
        else:
            edges = np.concatenate([edges, [hot + 1.0]])
        lo = edges[:-1]
        hi = edges[1:]
        count = hi - lo
        # Mass of ranks [lo, hi): exact for single ranks, the integral of
        # x ** -alpha over [lo - 1/2, hi - 1/2) for wider bins.
        single = count == 1
        mass = np.empty_like(lo)
        mass[single] = lo[single] ** -alpha
        a = lo[~single] - 0.5
        b = hi[~single] - 0.5
        if abs(alpha - 1.0) < 1e-9:
            mass[~single] = np.log(b / a)
        else:
            mass[~single] = (b ** (1 - alpha) - a ** (1 - alpha)) / (1 - alpha)
        mass /= mass.sum()
        self.count = count
        self.q = (1.0 - cold) * mass / count + cold / volume
        self.cold_q = cold / volume
        self.cold_count = volume - hot
        self.hot = hot
        self.volume = volume

    def rwss(self, n):
        """Expected RWSS_1 (blocks) for ``n`` expected requests (array)."""
        n = np.asarray(n, dtype=np.float64)
        m = n[..., None] * self.q
        hot = (self.count * (1.0 - np.exp(-m) * (1.0 + m))).sum(axis=-1)
        mc = n * self.cold_q
        return hot + self.cold_count * (1.0 - np.exp(-mc) * (1.0 + mc))

    def top(self, k):
        """Per-bin fraction of blocks within the top ``k`` ranks."""
        cum = np.cumsum(self.count)
        prev = cum - self.count
        return np.clip((k - prev) / self.count, 0.0, 1.0)


def scan_extra(n, volume_blocks, cold, scanned_blocks):
    """RWSS_1 a scan adds: scanned blocks a cold read also touched."""
    return scanned_blocks * (1.0 - np.exp(-n * cold / volume_blocks))


def demand_table(arch, params, grid, sizes):
    """RWSS_1 / hot blocks against (hot blocks, n / hot blocks).

    One row per hot-set size in ``sizes`` (the zipf mass per rank
    *fraction* depends on the size: for db's alpha of 1.2 the RWSS_1 per
    hot block falls by a quarter for every 4x), one column per ``grid``
    value of n / H; the fleet interpolates in both logarithms.
    """
    p = params[arch]
    rows = []
    for hot in sizes:
        hot = int(hot)
        rb = RankBins(hot, hot * p['vol_over_hot'], p['alpha'], p['cold'])
        rows.append(rb.rwss(grid * hot) / hot)
    return np.array(rows)


class Fleet(object):
    """The VMs of a fleet: archetype, size, rate and its changes.

    Everything random comes from ``seed``; arrays are indexed by VM.
    """

    def __init__(self, hosts, vms_per_host, days, window_s, seed):
        rng = np.random.Generator(np.random.PCG64(seed))
        self.params = archetype_params()
        n = hosts * vms_per_host
        self.n = n
        self.hosts = hosts
        self.vms_per_host = vms_per_host
        self.window_s = float(window_s)
        self.windows = int(round(days * 86400.0 / window_s))
        share = np.array([self.params[a]['share'] for a in ARCHETYPES])
        self.arch = rng.choice(len(ARCHETYPES), size=n, p=share / share.sum())
        hot_rel = np.array([self.params[a]['hot_rel'] for a in ARCHETYPES])
        scale = np.exp(rng.normal(0.0, K.VM_SIZE_SIGMA, n))
        self.hot_blocks = np.maximum(
            1.0, K.WEB_HOT_BYTES_MEDIAN / K.BLOCK_SIZE * hot_rel[self.arch]
            * scale)
        # Requests per hot block per RWSS window: the archetype's share of
        # the mix's requests over its share of hot blocks, relative to
        # web's, times the fleet's intensity and a per-VM factor.
        per_block = share / hot_rel
        per_block = per_block / per_block[0]
        self.intensity = (K.WEB_REQUESTS_PER_HOT_BLOCK * per_block[self.arch]
                          * np.exp(rng.normal(0.0, K.VM_RATE_SIGMA, n)))
        self.amplitude = rng.uniform(K.DIURNAL_AMPLITUDE[0],
                                     K.DIURNAL_AMPLITUDE[1], n)
        # Tenants peak at different hours, but not uniformly: a VM's peak
        # hour is its host group's (most of a region's users) plus spread.
        self.phase = (rng.normal(0.0, K.DIURNAL_PHASE_SIGMA_H, n)
                      * 3600.0 + K.DIURNAL_PEAK_H * 3600.0)
        ndays = int(np.ceil(days)) + 2
        steps = rng.normal(-K.DAILY_RATE_SIGMA ** 2 / 2.0,
                           K.DAILY_RATE_SIGMA, (n, ndays))
        steps[:, 0] = 0.0
        self.log_walk = np.cumsum(steps, axis=1)
        # ASSUMPTION: each web VM's weekly backup starts at its own time
        # of the week (the generator puts every trace's at 3/4 of the
        # period).
        self.scan_offset = rng.uniform(0.0, 7 * 86400.0, n)
        self.write = np.array([self.params[a]['write']
                               for a in ARCHETYPES])[self.arch]
        grid = np.geomspace(1e-4, 1e4, 321)
        self._lgrid = np.log(grid)
        lo, hi = self.hot_blocks.min(), self.hot_blocks.max()
        sizes = np.geomspace(max(1.0, lo / 1.01), hi * 1.01 + 1, 13)
        self._lsize = np.log(sizes)
        self._tab = np.stack([demand_table(a, self.params, grid, sizes)
                              for a in ARCHETYPES])
        pos = ((np.log(self.hot_blocks) - self._lsize[0])
               / (self._lsize[1] - self._lsize[0]))
        self._s0 = np.clip(pos.astype(np.int64), 0, len(sizes) - 2)
        self._sw = np.clip(pos - self._s0, 0.0, 1.0)

    def rate_factor(self, t):
        """Each VM's request rate at time t over its mean rate."""
        day = t / 86400.0
        d0 = int(np.floor(day))
        f = day - d0
        walk = (1 - f) * self.log_walk[:, d0] + f * self.log_walk[:, d0 + 1]
        diurnal = 1.0 + self.amplitude * np.cos(
            2 * np.pi * (t - self.phase) / 86400.0)
        return np.exp(walk) * diurnal

    def demand_blocks(self, window):
        """Expected RWSS_1 (blocks) of every VM at the end of a window.

        Over the trailing RWSS window (the agent's allocation_window).
        """
        t_end = (window + 1) * self.window_s
        t_mid = t_end - K.RWSS_WINDOW_S / 2.0
        n_rel = self.intensity * self.rate_factor(t_mid)
        x = np.log(np.clip(n_rel, 1e-4, 1e4))
        # Interpolate each archetype's table at once.
        pos = (x - self._lgrid[0]) / (self._lgrid[1] - self._lgrid[0])
        i0 = np.clip(pos.astype(np.int64), 0, len(self._lgrid) - 2)
        w = pos - i0
        a, s0, sw = self.arch, self._s0, self._sw
        rel = ((1 - sw) * ((1 - w) * self._tab[a, s0, i0]
                           + w * self._tab[a, s0, i0 + 1])
               + sw * ((1 - w) * self._tab[a, s0 + 1, i0]
                       + w * self._tab[a, s0 + 1, i0 + 1]))
        blocks = rel * self.hot_blocks
        return blocks + self._scan_blocks(t_end, n_rel)

    def _scan_blocks(self, t_end, n_rel):
        p = self.params['web']
        is_scan = self.arch == ARCHETYPES.index('web')
        t_start = t_end - K.RWSS_WINDOW_S
        period, length = p['scan_period'], p['scan_seconds']
        k = np.floor((t_end - self.scan_offset) / period)
        start = self.scan_offset + np.maximum(k, 0) * period
        overlap = np.clip(np.minimum(t_end, start + length)
                          - np.maximum(t_start, start), 0.0, None)
        overlap = np.where(is_scan & (k >= 0), overlap, 0.0)
        volume = self.hot_blocks * p['vol_over_hot']
        scanned = volume * p['scan_fraction'] * overlap / length
        return scan_extra(n_rel * self.hot_blocks, volume, p['cold'],
                          scanned)

    def demand_bytes(self, window):
        return self.demand_blocks(window) * K.BLOCK_SIZE

    def requests_per_s(self, vm, t):
        """The VM's request rate (IOPS) at time t."""
        return (self.intensity[vm] * self.hot_blocks[vm] / K.RWSS_WINDOW_S
                * self.rate_factor(t)[vm])
