# SPDX-License-Identifier: Apache-2.0
"""Planning the evacuation of a host: order, destinations, strategies.

Emptying a host for maintenance moves every VM at once; restarting them
cold would make each one read its whole working set from the shared
storage again.  The plan spares the storage the way a massive storage
migration mixes schemes (Zhou et al., section 7.4: each VM gets the scheme
of lowest cost for it, and the mix beats any single scheme):

* **Strategy, per volume**, from :func:`nova_ext.costmodel.choose_strategy`
  with the bandwidth each transfer really gets: the source's link shared by
  ``max_concurrent`` transfers.  A hot cache is copied over the link
  (``hybrid``, or ``firepan_if`` on dmcache; ``firepan`` when it fits in
  the downtime budget), a cold one moves nothing (``none``), and only when
  the link is slower than the storage does the model fall back to
  strategies that read from it.
* **Destination, per VM**: among the hosts that accept VMs and can hold
  its predicted demand under ``threshold`` of their capacity, the one that
  keeps the variance of cache utilisation lowest (as the balancer); ties go
  to the host with fewer VMs planned so far, so that cold VMs spread over
  the destination links.  When no host has room, the least loaded one
  takes it anyway (the host must be emptied) and the step says so.
* **Order and concurrency**: longest transfer first (the classic rule
  that shortens a list schedule), at most ``max_concurrent`` migrations
  out of the source and ``per_destination`` into any one destination; the
  plan's ``wave``/``slot``/``start_s`` are a simulation of that schedule
  with the estimated transfer times.

No I/O here: ``fcache evacuate`` fills the model from Nova and the agents
and executes the plan; the fleet simulation replays it.
"""

from nova_ext import costmodel

COPYING = ('firepan', 'firepan_if', 'cloudcache', 'hybrid')
DEFAULT_MAX_CONCURRENT = 2
DEFAULT_PER_DESTINATION = 1
DEFAULT_THRESHOLD = 0.9
# What a live migration costs besides the cache (memory copy, switch):
# only used to order and simulate, never to decide a strategy.
DEFAULT_STEP_OVERHEAD_S = 1.0


class EvacuationImpossible(Exception):
    """No host can receive the source's VMs."""


class VolumeStep(object):
    """What happens to one volume's cache: the strategy and its cost."""

    __slots__ = ('volume', 'strategy', 'reason', 'link_bytes',
                 'storage_bytes')

    def __init__(self, volume, strategy, reason, link_bytes, storage_bytes):
        self.volume = volume
        self.strategy = strategy
        self.reason = reason
        self.link_bytes = link_bytes
        self.storage_bytes = storage_bytes

    def as_dict(self):
        return {'volume': self.volume.id, 'strategy': self.strategy,
                'reason': self.reason, 'cached_bytes':
                self.volume.cached_bytes, 'link_bytes': self.link_bytes,
                'storage_bytes': self.storage_bytes}


class Step(object):
    """One live migration of the plan."""

    __slots__ = ('vm', 'destination', 'volumes', 'fits', 'reason', 'wave',
                 'slot', 'start_s', 'est_seconds', 'order')

    def __init__(self, vm, destination, volumes, fits, reason, est_seconds):
        self.vm = vm
        self.destination = destination
        self.volumes = volumes
        self.fits = fits
        self.reason = reason
        self.est_seconds = est_seconds
        self.wave = self.slot = self.start_s = self.order = None

    @property
    def strategies(self):
        """``{volume id: strategy}``."""
        return {v.volume.id: v.strategy for v in self.volumes}

    def as_dict(self):
        return {'order': self.order, 'vm': self.vm.id,
                'vm_name': self.vm.name, 'source': self.vm.host,
                'destination': self.destination,
                'demand_bytes': self.vm.demand_bytes, 'fits': self.fits,
                'reason': self.reason, 'wave': self.wave, 'slot': self.slot,
                'start_s': self.start_s, 'est_seconds': self.est_seconds,
                'volumes': [v.as_dict() for v in self.volumes]}


class Plan(object):
    """The ordered steps of an evacuation and what they should cost.

    ``link_bytes`` cross the migration network, ``storage_bytes`` are read
    from the shared storage to rebuild caches, ``est_seconds`` is when the
    last step ends (simulated).
    """

    def __init__(self, source, steps, skipped, max_concurrent,
                 per_destination, link_bps, origin_bps):
        self.source = source
        self.steps = steps
        self.skipped = skipped
        self.max_concurrent = max_concurrent
        self.per_destination = per_destination
        self.link_bps = link_bps
        self.origin_bps = origin_bps
        self.link_bytes = sum(v.link_bytes for s in steps for v in s.volumes)
        self.storage_bytes = sum(v.storage_bytes for s in steps
                                 for v in s.volumes)
        self.est_seconds = max([s.start_s + s.est_seconds for s in steps],
                               default=0.0)

    def as_dict(self):
        return {'source': self.source,
                'max_concurrent': self.max_concurrent,
                'per_destination': self.per_destination,
                'link_bps': self.link_bps, 'origin_bps': self.origin_bps,
                'link_bytes': self.link_bytes,
                'storage_bytes': self.storage_bytes,
                'est_seconds': self.est_seconds,
                'steps': [s.as_dict() for s in self.steps],
                'skipped': [{'vm': vm.id, 'vm_name': vm.name,
                             'reason': why} for vm, why in self.skipped]}


def _volume_steps(vm, link_share, origin_bps, max_downtime_s):
    steps = []
    seconds = 0.0
    for vol in vm.volumes:
        strategy, reason = costmodel.choose_strategy(
            vol.as_volume_show(), link_bps=link_share,
            origin_bps=origin_bps, max_downtime_s=max_downtime_s)
        if strategy == 'cachemior':
            # The model weighs one VM's warm-up; an evacuation moves every
            # VM of the host at once, and rebuilding each cache from the
            # shared storage is what it must spare (the fleet simulation:
            # cachemior for all read 119-121 % of all-none's storage on a
            # slow link, hybrid none).  Copy over the link instead.
            copy = 'firepan_if' if vol.engine == 'dmcache' else 'hybrid'
            reason = ('%s would rebuild the cache from the shared storage '
                      '(%s); an evacuation copies it over the link instead '
                      '(%s), slower for this VM, free for the storage'
                      % (strategy, reason, copy))
            strategy = copy
        link = storage = 0
        if strategy in COPYING:
            link = vol.cached_bytes
            seconds = max(seconds, link / link_share)
        elif strategy == 'cachemior':
            # The hot list crosses the link; the blocks come from storage.
            link = 8 * (vol.cached_bytes // vol.block_size)
            storage = vol.cached_bytes
            seconds = max(seconds, storage / origin_bps)
        else:
            # Whatever was cached is read from the storage again on demand.
            storage = vol.cached_bytes
        steps.append(VolumeStep(vol, strategy, reason, link, storage))
    return steps, seconds


def _schedule(steps, max_concurrent, per_destination):
    """Simulate the executor: list scheduling in plan order."""
    pending = list(steps)
    running = []                # (end, slot, step)
    free_slots = list(range(max_concurrent))
    now = 0.0
    starts = []
    while pending:
        busy = {}
        for _, _, s in running:
            busy[s.destination] = busy.get(s.destination, 0) + 1
        started = False
        if free_slots:
            for step in pending:
                if busy.get(step.destination, 0) < per_destination:
                    pending.remove(step)
                    step.slot = free_slots.pop(0)
                    step.start_s = now
                    if not starts or starts[-1] != now:
                        starts.append(now)
                    step.wave = len(starts) - 1
                    running.append((now + step.est_seconds, step.slot, step))
                    started = True
                    break
        if started:
            continue
        # Wait for the first migration to end.
        running.sort(key=lambda r: (r[0], r[1]))
        now, slot, _ = running.pop(0)
        free_slots.append(slot)
        free_slots.sort()


def plan_evacuation(source, hosts, vms, max_concurrent=DEFAULT_MAX_CONCURRENT,
                    per_destination=DEFAULT_PER_DESTINATION, link_bps=None,
                    origin_bps=None, threshold=DEFAULT_THRESHOLD,
                    max_downtime_s=costmodel.DEFAULT_MAX_DOWNTIME_S,
                    step_overhead_s=DEFAULT_STEP_OVERHEAD_S):
    """Plan moving every VM off ``source``.

    :param source: name of the host to empty.
    :param hosts: every :class:`~nova_ext.balancer.model.Host` (the source
        included; hosts with ``accepts=False`` receive nothing).
    :param vms: the VMs of all hosts (their demand is the hosts' load).
    :param link_bps: migration link bandwidth (default: the cost model's).
    :param origin_bps: shared-storage bandwidth one VM gets.
    :returns: a :class:`Plan`.
    :raises EvacuationImpossible: VMs to move and no host to take them.
    :raises ValueError: a bad concurrency.
    """
    if max_concurrent < 1 or per_destination < 1:
        raise ValueError('max_concurrent and per_destination must be at '
                         'least 1 (got %r and %r)'
                         % (max_concurrent, per_destination))
    link_bps = float(link_bps or costmodel.DEFAULT_LINK_BPS)
    origin_bps = float(origin_bps or costmodel.DEFAULT_ORIGIN_BPS)
    link_share = link_bps / max_concurrent

    by_name = {h.name: h for h in hosts}
    load = {h.name: 0 for h in hosts}
    for vm in vms:
        if vm.host in load:
            load[vm.host] += vm.demand_bytes
    targets = sorted(h.name for h in hosts
                     if h.accepts and h.name != source and
                     h.capacity_bytes > 0)
    here = [vm for vm in vms if vm.host == source]
    skipped = [(vm, 'already migrating') for vm in here if vm.migrating]
    here = [vm for vm in here if not vm.migrating]
    if here and not targets:
        raise EvacuationImpossible(
            'no host can receive the %d VMs of %s: every other compute '
            'is disabled, unknown to fcache or has no cache; enable one '
            '(openstack compute service set --enable) or add its agent'
            % (len(here), source))

    prepared = []
    for vm in here:
        volumes, seconds = _volume_steps(vm, link_share, origin_bps,
                                         max_downtime_s)
        prepared.append((seconds + step_overhead_s, vm, volumes))
    # Longest first; then the larger demand, then the id (deterministic).
    prepared.sort(key=lambda p: (-p[0], -p[1].demand_bytes, p[1].id))

    # Utilisation of every host with a cache (the source included: the
    # variance is the whole cloud's), and its sum, kept up to date.
    util = {h.name: load[h.name] / h.capacity_bytes
            for h in hosts if h.capacity_bytes > 0}
    n = len(util)
    s1 = sum(util.values())
    incoming = {name: 0 for name in targets}
    steps = []
    for seconds, vm, volumes in prepared:
        d = vm.demand_bytes
        src_old = util.get(source, 0.0)
        src_new = src_old
        if source in util:
            src_new = (load[source] - d) / by_name[source].capacity_bytes
        best = None
        for name in targets:
            cap = by_name[name].capacity_bytes
            old = util[name]
            new = (load[name] + d) / cap
            fits = load[name] + d <= threshold * cap
            d1 = (src_new - src_old) + (new - old)
            d2 = (src_new ** 2 - src_old ** 2) + (new ** 2 - old ** 2)
            delta = d2 / n - ((s1 + d1) ** 2 - s1 ** 2) / (n * n)
            key = (not fits, delta, incoming[name], name)
            if best is None or key < best[0]:
                best = (key, name, fits, new)
        _, name, fits, new = best
        cap = by_name[name].capacity_bytes
        if fits:
            reason = ('%s holds its %d bytes of demand at %.0f %% of its '
                      'cache, the lowest variance of cache load'
                      % (name, d, new * 100))
        else:
            reason = ('no host holds its %d bytes of demand under %.0f %%: '
                      '%s, the least loaded, goes to %.0f %% (shares are '
                      'cut in proportion)' % (d, threshold * 100, name,
                                              new * 100))
        s1 += (new - util[name]) + (src_new - src_old)
        load[name] += d
        util[name] = new
        if source in util:
            load[source] -= d
            util[source] = src_new
        incoming[name] += 1
        steps.append(Step(vm, name, volumes, fits, reason, seconds))
    for i, step in enumerate(steps):
        step.order = i
    _schedule(steps, max_concurrent, per_destination)
    return Plan(source, steps, skipped, max_concurrent, per_destination,
                link_bps, origin_bps)
