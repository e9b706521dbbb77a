# SPDX-License-Identifier: Apache-2.0
"""Choosing a cache migration strategy (``auto``).

The choice weighs what each strategy costs the migrating VM, with the
quantities the agents report and two bandwidths the operator knows:

``C``  bytes cached for the volume on the source (``cached_blocks`` x
       ``block_size``)
``D``  bytes of those that are dirty (write_back only)
``L``  bandwidth of the migration link, or the rate limit if lower
``O``  bandwidth the shared storage gives this VM

Costs (seconds), following the FirepanIF performance model (Eq. 1-3: a
VM's IOPS is ``H*F + (1-H)*S`` for hit ratio ``H``, flash ``F`` and storage
``S``), where a strategy's job is to raise ``H`` early without stealing
``S``:

* ``firepan`` stops the VM for ``C / L``: only worth it when that is
  within ``max_downtime`` (the VM then resumes fully warm and nothing is
  left to do).
* ``hybrid`` moves the cache in ``C / L`` while the VM runs and serves
  misses on not-yet-copied blocks from the source, so it wins whenever the
  link is at least as fast as the storage (``L >= O``): every block it
  copies is one the VM does not take from ``S``.
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
    if link >= origin:
        return 'hybrid', ('link %.0f MB/s >= storage %.0f MB/s: copy while '
                          'running, fetch misses from the source'
                          % (link / 1e6, origin / 1e6))
    if dirty:
        return 'cloudcache', ('link slower than storage; %d dirty bytes '
                              'fetched on demand instead of flushed' % dirty)
    return 'cachemior', 'link slower than storage: rebuild from storage'
