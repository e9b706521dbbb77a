# SPDX-License-Identifier: Apache-2.0
"""The balancer's view of a cloud: hosts, VMs and their cached volumes.

Plain classes, no I/O: whoever builds them (the ``fcache-balancer``
service from the agents and Nova, ``fcache evacuate``, the fleet
simulation) fills in the figures.

A host's cache *load* is the sum of the predicted demand (RWSS, bytes) of
the VMs it runs; its *utilisation* is that load over its cache capacity.
"""


class Host(object):
    """A compute host and the capacity of its flash cache.

    :param name: the Nova compute host name.
    :param capacity_bytes: bytes of cache the agent allocates from.
    :param accepts: False when the host must not receive VMs (disabled
        compute service, being evacuated): it still counts in the variance
        of the cloud's load but is never a destination.
    """

    __slots__ = ('name', 'capacity_bytes', 'accepts')

    def __init__(self, name, capacity_bytes, accepts=True):
        self.name = name
        self.capacity_bytes = int(capacity_bytes)
        self.accepts = accepts

    def __repr__(self):
        return 'Host(%r, %d)' % (self.name, self.capacity_bytes)


class Volume(object):
    """One cached volume of a VM, as its host's agent reports it.

    :param demand_bytes: predicted RWSS (``rwss_predicted_bytes``).
    :param cached_bytes: bytes cached now (``cached_blocks`` x block size).
    :param dirty_bytes: bytes of those that are dirty.
    :param engine: ``ucache`` or ``dmcache`` (the cost model avoids the
        on-demand strategies on dmcache).
    """

    __slots__ = ('id', 'demand_bytes', 'cached_bytes', 'dirty_bytes',
                 'block_size', 'engine')

    def __init__(self, id, demand_bytes=0, cached_bytes=0, dirty_bytes=0,
                 block_size=4096, engine='ucache'):
        self.id = id
        self.demand_bytes = int(demand_bytes or 0)
        self.cached_bytes = int(cached_bytes or 0)
        self.dirty_bytes = int(dirty_bytes or 0)
        self.block_size = int(block_size or 4096)
        self.engine = engine or 'ucache'

    def as_volume_show(self):
        """The fields of ``volume-show`` that the cost model reads."""
        return {'volume_id': self.id,
                'block_size': self.block_size,
                'cached_blocks': self.cached_bytes // self.block_size,
                'dirty_blocks': self.dirty_bytes // self.block_size,
                'engine': self.engine}

    def __repr__(self):
        return 'Volume(%r, demand=%d, cached=%d)' % (
            self.id, self.demand_bytes, self.cached_bytes)


class Vm(object):
    """A VM (Nova server) and the cache demand it brings to its host.

    ``demand_bytes`` is the sum of its volumes' predicted RWSS; when
    ``volumes`` is given and ``demand_bytes`` (``cached_bytes``,
    ``dirty_bytes``) is None, it is computed from them.

    :param migrating: Nova is migrating it now (task_state or an
        in-progress migration): never chosen.
    :param last_moved_window: the window in which it was last moved, or
        None: a VM moved less than the cool-down ago is not chosen again.
    """

    __slots__ = ('id', 'host', 'demand_bytes', 'cached_bytes',
                 'dirty_bytes', 'migrating', 'last_moved_window', 'volumes',
                 'name')

    def __init__(self, id, host, demand_bytes=None, cached_bytes=None,
                 dirty_bytes=None, migrating=False, last_moved_window=None,
                 volumes=(), name=None):
        self.id = id
        self.host = host
        self.volumes = list(volumes or ())
        if demand_bytes is None:
            demand_bytes = sum(v.demand_bytes for v in self.volumes)
        if cached_bytes is None:
            cached_bytes = sum(v.cached_bytes for v in self.volumes)
        if dirty_bytes is None:
            dirty_bytes = sum(v.dirty_bytes for v in self.volumes)
        self.demand_bytes = int(demand_bytes)
        self.cached_bytes = int(cached_bytes)
        self.dirty_bytes = int(dirty_bytes)
        self.migrating = bool(migrating)
        self.last_moved_window = last_moved_window
        self.name = name

    def __repr__(self):
        return 'Vm(%r, %r, demand=%d)' % (self.id, self.host,
                                          self.demand_bytes)


def host_loads(hosts, vms):
    """Return ``{host name: demand bytes}`` of the VMs on each host.

    VMs on a host that is not in ``hosts`` are ignored (a compute the
    balancer does not manage).
    """
    loads = {h.name: 0 for h in hosts}
    for vm in vms:
        if vm.host in loads:
            loads[vm.host] += vm.demand_bytes
    return loads
