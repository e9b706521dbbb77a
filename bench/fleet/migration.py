# SPDX-License-Identifier: Apache-2.0
"""One VM's live migration per strategy: downtime, reads, warm-up curve.

The VM's cache holds the top ``cached`` ranks of its hot set (the blocks
with the most reuse: the RWS).  From the switchover (time 0) the model
follows, for every rank bin, the fraction of its blocks already copied
(the background copy sends the hottest first, at the link share) and the
probability that the VM has touched a block since (``1 - exp(-q n)`` after
``n`` requests), and from those the share of the VM's requests that hit
the destination's cache, are fetched from the source's cache, or miss to
the shared storage.  A request's cost is 1 for a hit, SOURCE_FETCH_OVER_HIT
from the source, KAPPA_MISS_OVER_HIT from the storage (constants.py); the
VM's bandwidth relative to before the migration is the mean cost before
over the mean cost now, its request rate follows that bandwidth, and it is
0 while the VM is paused.

Per strategy (doc/reference/migration.rst, "Strategies"):

``none``        a cached block's first touch is a storage read.
``hybrid``      not-yet-copied blocks are fetched from the source on a
                miss: no storage read for a cached block.
``cloudcache``  dirty not-yet-copied blocks from the source, clean ones
                from the storage.
``firepan_if``  the VM runs against the storage until the copy is done:
                every request is a storage read; then the whole cache.
``firepan``     the VM is paused for the copy; then the whole cache.
``cachemior``   the destination preloads the hot list from the storage
                at the VM's storage share; touches before the preload are
                storage reads as with none.

Shared-storage reads are counted *over what the VM would read anyway*
(its misses on blocks that were never cached are the same before and
after): that is what an evacuation adds to the storage's load.

All VMs of a call are simulated together, vectorised over (VM, bin).
"""

import numpy as np

from bench.fleet import constants as K
from bench.fleet import workload
from nova_ext.balancer.evacuation_plan import COPYING

STRATEGIES = ('none', 'cachemior', 'firepan', 'firepan_if', 'cloudcache',
              'hybrid')


def time_grid(horizon_s):
    """Seconds after the switchover at which the state is evaluated."""
    parts = [np.arange(0.0, 10.0, 0.05), np.arange(10.0, 300.0, 0.25)]
    if horizon_s > 300.0:
        parts.append(np.geomspace(300.0, horizon_s, 1500))
    return np.unique(np.concatenate(parts))


class VmState(object):
    """What the model needs of one migrating VM."""

    def __init__(self, hot_blocks, volume_blocks, alpha, cold, cached_blocks,
                 iops, dirty_fraction=0.0, memory_bytes=None):
        self.bins = workload.RankBins(hot_blocks, volume_blocks, alpha, cold,
                                      exact=64, bins=160)
        self.cached_blocks = float(min(cached_blocks, self.bins.hot))
        self.iops = float(iops)
        self.dirty_fraction = float(dirty_fraction)
        self.memory_bytes = (K.VM_MEMORY_BYTES if memory_bytes is None
                             else memory_bytes)

    @property
    def cached_bytes(self):
        return self.cached_blocks * K.BLOCK_SIZE


def _pad(arrays, fill):
    width = max(len(a) for a in arrays)
    out = np.full((len(arrays), width), fill, dtype=np.float64)
    for i, a in enumerate(arrays):
        out[i, :len(a)] = a
    return out


def _top(count, k):
    """Fraction of each bin's blocks within the top k ranks, per VM."""
    cum = np.cumsum(count, axis=1)
    prev = cum - count
    with np.errstate(invalid='ignore', divide='ignore'):
        f = np.clip((k[:, None] - prev) / count, 0.0, 1.0)
    return np.where(count > 0, f, 0.0)


def copy_seconds(strategy, cached_bytes, link_bps):
    """How long the cache transfer takes after the switchover."""
    if strategy in COPYING:
        return cached_bytes / (link_bps * K.COPY_RATE_OF_LINK)
    return 0.0


def downtime_s(strategy, cached_bytes, link_bps):
    d = K.SWITCH_DOWNTIME_S[strategy]
    if strategy == 'firepan':
        d += copy_seconds(strategy, cached_bytes, link_bps)
    return d


def simulate(vms, strategies, link_bps, origin_bps=K.ORIGIN_BPS,
             horizon_s=K.EVACUATION_HORIZON_S, recovered=0.9):
    """Simulate each VM's migration from its switchover.

    :param vms: :class:`VmState` list.
    :param strategies: one strategy per VM.
    :param link_bps: the copy rate each VM's transfer gets.
    :returns: dict of arrays: ``t`` (the grid), ``rel`` (VM x t, bandwidth
        over before), ``extra_reads`` (bytes of shared-storage reads over
        the VM's usual by the horizon), ``extra_reads_t`` (VM x t,
        cumulative), ``recovery_s`` (from the switchover until the
        bandwidth stays at ``recovered`` of before; inf if not within the
        horizon), ``downtime_s``, ``copy_s``, ``link_bytes``, ``h0``.
    """
    n_vm = len(vms)
    t = time_grid(horizon_s)
    count = _pad([v.bins.count for v in vms], 0.0)
    q = _pad([v.bins.q for v in vms], 0.0)
    cached = np.array([v.cached_blocks for v in vms])
    iops = np.array([v.iops for v in vms])
    dirty = np.array([v.dirty_fraction for v in vms])
    strat = np.array(strategies)
    f = _top(count, cached)                 # cached fraction per bin
    cq = count * q
    h0 = (cq * f).sum(axis=1)               # hit ratio before
    kappa = K.KAPPA_MISS_OVER_HIT
    src_cost = K.SOURCE_FETCH_OVER_HIT
    t0_cost = h0 + (1.0 - h0) * kappa
    cbytes = cached * K.BLOCK_SIZE
    copy_s = np.array([copy_seconds(s, b, link_bps)
                       for s, b in zip(strategies, cbytes)])
    down = np.array([downtime_s(s, b, link_bps)
                     for s, b in zip(strategies, cbytes)])
    copy_rate = link_bps * K.COPY_RATE_OF_LINK / K.BLOCK_SIZE   # blocks/s
    preload_rate = origin_bps / K.BLOCK_SIZE

    is_none = strat == 'none'
    is_hyb = strat == 'hybrid'
    is_cc = strat == 'cloudcache'
    is_fif = strat == 'firepan_if'
    is_fp = strat == 'firepan'
    is_cm = strat == 'cachemior'

    n = np.zeros(n_vm)                      # requests since resuming
    extra = np.zeros(n_vm)                  # extra storage reads, blocks
    rel = np.zeros((n_vm, len(t)))
    extra_t = np.zeros((n_vm, len(t)))
    for j in range(len(t)):
        tau = t[j]
        dt = t[j + 1] - tau if j + 1 < len(t) else 0.0
        touched = 1.0 - np.exp(-q * n[:, None])
        # Copied (or preloaded) prefix of the cache, in ranks.
        moved = np.where(is_cm, np.minimum(cached, preload_rate * tau),
                         np.minimum(cached, copy_rate * tau))
        g = np.minimum(_top(count, moved), f)
        rest = f - g                        # cached, not yet moved
        moved_hit = (cq * (g + rest * touched)).sum(axis=1)
        untouched = (cq * rest * (1.0 - touched)).sum(axis=1)
        none_hit = (cq * f * touched).sum(axis=1)

        hit = np.where(is_none, none_hit, moved_hit)
        src = np.where(is_hyb, untouched,
                       np.where(is_cc, dirty * untouched, 0.0))
        # Storage reads over the usual: requests to cached blocks that
        # miss now.
        extra_mass = np.where(is_none, h0 - none_hit,
                              np.where(is_cc, (1 - dirty) * untouched,
                                       np.where(is_cm, untouched, 0.0)))
        during = tau < copy_s
        hit = np.where(is_fif & during, 0.0, hit)
        extra_mass = np.where(is_fif & during, h0, extra_mass)
        hit = np.where((is_fif | is_fp) & ~during, h0, hit)
        extra_mass = np.where((is_fif | is_fp) & ~during, 0.0, extra_mass)
        cost = hit + src * src_cost + (1.0 - hit - src) * kappa
        r = np.where(tau < down, 0.0, t0_cost / cost)
        rel[:, j] = r
        rate = iops * r
        extra_t[:, j] = extra
        extra += rate * dt * extra_mass
        if np.any(is_cm):
            # The preload reads what the VM has not touched yet.
            k_next = np.minimum(cached, preload_rate * (tau + dt))
            step = np.minimum(_top(count, k_next), f) - g
            extra += np.where(is_cm,
                              (count * step * (1.0 - touched)).sum(axis=1),
                              0.0)
        n += rate * dt
    bad = rel < recovered
    recovery = np.full(n_vm, np.inf)
    for i in range(n_vm):
        idx = np.nonzero(bad[i])[0]
        if len(idx) == 0:
            recovery[i] = 0.0
        elif idx[-1] + 1 < len(t):
            recovery[i] = t[idx[-1] + 1]
    return {'t': t, 'rel': rel, 'extra_reads': extra * K.BLOCK_SIZE,
            'extra_reads_t': extra_t * K.BLOCK_SIZE, 'recovery_s': recovery,
            'downtime_s': down, 'copy_s': copy_s, 'h0': h0,
            'link_bytes': np.where(np.isin(strat, COPYING),
                                   cbytes, 0.0)}
