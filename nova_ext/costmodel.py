# SPDX-License-Identifier: Apache-2.0
"""Choosing a cache migration strategy (``auto``).

The choice weighs what each strategy costs the migrating VM, with the
quantities the agents report and two bandwidths the operator knows:

``C``  bytes cached for the volume on the source (``cached_blocks`` x
       ``block_size``)
``D``  bytes of those that are dirty (write_back only)
``L``  bandwidth of the migration link, or the rate limit if lower
``O``  bandwidth the shared storage gives this VM

Costs, from the FirepanIF performance model (``nova_ext.contention``,
the paper's Eq. 1-3: a VM's rate is a cache part and a shared-storage
part, each throttled by its device's fair share and the network).  A
strategy's job is to raise the hit ratio ``H`` early without taking the
VM's share of ``O``; while its copy runs the destination's cache is still
cold (``H = 0``), so the VM runs at the rate of the path its misses take,
which the copy may share (:func:`vm_rate_during_copy`):

* ``firepan`` stops the VM for ``C / L``: only worth it when that is
  within ``max_downtime`` (the VM then resumes fully warm and nothing is
  left to do).
* ``hybrid`` moves the cache in ``C / L`` while the VM runs and fetches
  its misses on not-yet-copied blocks from the source over the link,
  which the background copy shares (one rate limit covers both): the VM
  gets ``L / 2``.  ``cachemior`` reads the same blocks from the storage,
  which its warmer shares with the VM (the paper, 4.2): the VM gets
  ``O / 2``.  ``hybrid`` wins whenever the link is at least as fast as
  the storage (``L >= O``).
* When the link is slower than the storage, copying over it is the slow
  path: with dirty data ``cloudcache`` (dirty blocks on demand, no flush
  downtime of ``D / O``), otherwise ``cachemior`` (rebuild from storage,
  ``C / O`` of background reads).
* With nothing cached, ``none``.

On the ``dmcache`` engine a kernel miss cannot be served from a peer, so
the on-demand strategies are not available (doc/reference/dmcache.rst): where
the model picks ``hybrid`` it takes ``firepan_if`` (the copy while the VM runs,
the kernel's passthrough mode as the invalidation filter), and where it
picks ``cloudcache`` it takes ``cachemior`` (dirty blocks are cleaned to
the storage first).
"""

from nova_ext import contention
from nova_ext import vocabulary

STRATEGIES = vocabulary.STRATEGIES

DEFAULT_LINK_BPS = 1000 * 1000 * 1000      # 1 GB/s: 10 GbE, roughly
DEFAULT_ORIGIN_BPS = 200 * 1000 * 1000     # a share of a storage server
DEFAULT_MAX_DOWNTIME_S = 0.1


def choose_strategy(volume, link_bps=None, origin_bps=None,
                    max_downtime_s=DEFAULT_MAX_DOWNTIME_S):
    """Return ``(strategy, reason)`` for a ``volume-show`` result."""
    block = int(volume.get('block_size') or 4096)
    cached = int(volume.get('cached_blocks') or 0) * block
    dirty = int(volume.get('dirty_blocks') or 0) * block
    link = float(link_bps or DEFAULT_LINK_BPS)
    origin = float(origin_bps or DEFAULT_ORIGIN_BPS)

    strategy, reason = _choose(cached, dirty, link, origin, max_downtime_s)
    if volume.get('engine') == 'dmcache' and strategy in DMCACHE_INSTEAD:
        strategy, why = DMCACHE_INSTEAD[strategy]
        reason = '%s; %s' % (reason, why)
    return strategy, reason


DMCACHE_INSTEAD = {
    'hybrid': ('firepan_if', 'engine dmcache cannot fetch on demand: '
               'firepan_if copies while running'),
    'cloudcache': ('cachemior', 'engine dmcache cannot fetch on demand: '
                   'cachemior cleans dirty blocks and preloads'),
}


def _choose(cached, dirty, link, origin, max_downtime_s):
    if cached == 0:
        return 'none', 'nothing is cached'
    copy_s = cached / link
    if copy_s <= max_downtime_s:
        return 'firepan', ('whole cache copies in %.3f s <= %.3f s of '
                           'downtime' % (copy_s, max_downtime_s))
    fetch = vm_rate_during_copy('hybrid', link, origin)
    preload = vm_rate_during_copy('cachemior', link, origin)
    if fetch >= preload:
        return 'hybrid', ('link %.0f MB/s >= storage %.0f MB/s: copy while '
                          'running, fetch misses from the source (%.0f MB/s '
                          'for the VM during the copy, %.0f beside a '
                          'preload)' % (link / 1e6, origin / 1e6,
                                        fetch / 1e6, preload / 1e6))
    if dirty:
        return 'cloudcache', ('link slower than storage; %d dirty bytes '
                              'fetched on demand instead of flushed' % dirty)
    return 'cachemior', 'link slower than storage: rebuild from storage'


def vm_rate_during_copy(strategy, link, origin):
    """The migrating VM's rate (bytes/s) while a strategy's copy runs.

    The FirepanIF model with the destination's cache still cold (the hit
    ratio 0): the VM gets what the path of its misses gives it.  For
    ``firepan`` the VM is paused; ``hybrid`` fetches its misses from the
    source over the link, the copy the other half of the link's rate
    limit; ``cachemior`` reads the storage, its warmer one more sharer of
    the VM's share; ``none``, ``firepan_if`` and ``cloudcache`` (whose
    clean misses, the bulk, go to the storage) leave the VM's reads of the
    storage alone: their copy, if any, goes cache to cache.
    """
    if strategy == 'firepan':
        return 0.0
    if strategy == 'hybrid':
        # The misses' "storage" is the source's cache, not the limit: the
        # link, less the copy's half, is (Eq. 3's N).
        return contention.vm_rate(0.0, 0.0, contention.INF, link=link,
                                  copy=link / 2)
    sharers = 2 if strategy == 'cachemior' else 1
    return contention.vm_rate(0.0, 0.0, origin, storage=origin,
                              vms_on_storage=sharers)
