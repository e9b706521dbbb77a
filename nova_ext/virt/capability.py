# SPDX-License-Identifier: Apache-2.0
"""Can the destination of a live migration take a volume's cache?

A fleet may mix hosts that run fcache's driver with hosts that run Nova's
plain LibvirtDriver (a rollout, a host taken out of fcache).  A plain
destination connects a volume straight to the Cinder volume (the
*origin*) and never asks the source for its cache:

* a ``write_back`` volume must not go there: its dirty blocks exist only
  in the source's cache, the destination would read the origin without
  them, and the source's detach after the migration would write them
  over what the guest wrote since;
* a ``read_only`` or ``write_through`` volume may: the origin holds every
  write the guest was told is done, and the source, once the VM left,
  detaches it from its agent with nothing dirty to write.

So the destination advertises itself in its live-migration check
(:func:`describe`, carried by :mod:`nova_ext.virt.channel`), only when its
own agent answered, and the source decides per volume with
:func:`refusal`.  Nothing a plain LibvirtDriver sends resembles the
advertisement; an fcache host whose agent is down sends none either, and
is treated like a host without fcache.
"""

from oslo_log import log as logging

from nova_ext import costmodel
from nova_ext import exception

LOG = logging.getLogger(__name__)

# The write policies under which the origin holds every acknowledged write.
NOTHING_DIRTY = ('read_only', 'write_through')
# What the destination says of itself, from its agent's agent-status.
FIGURES = ('version', 'engine', 'capacity_bytes', 'free_bytes')
# The strategies that fetch a block from the source's cache when the VM
# misses on it: the dmcache engine cannot hold the request meanwhile
# (doc/reference/dmcache.rst, "Which strategies run on dmcache").
ON_DEMAND = tuple(costmodel.DMCACHE_INSTEAD)


def describe(agent, hostname):
    """This host as a destination, or None if its agent does not answer.

    :param agent: this host's :class:`nova_ext.agent.AgentClient`.
    """
    try:
        status = agent.status()
    except exception.FcacheException as exc:
        LOG.warning("This host's fcache agent does not answer (%s): live "
                    "migrations of cached volumes to this host are refused "
                    "for write_back volumes and fail for the others until "
                    "it does", exc)
        return None
    described = {key: status.get(key) for key in FIGURES}
    described['host'] = hostname
    return described


def engine_view(volume, destination):
    """The source's ``volume-show`` as the strategy choice must see it.

    ``auto`` avoids the on-demand strategies where either agent runs
    dmcache (:func:`nova_ext.costmodel.choose_strategy` reads the engine
    from the volume).
    """
    if destination and destination.get('engine') == 'dmcache':
        return dict(volume, engine='dmcache')
    return volume


def refusal(volume_id, source, destination, room):
    """Why the volume must not live-migrate there, or None.

    :param source: what the source describes of the volume
        (``fcache_source``: ``cached``, ``write_policy``, ``strategy``,
        ``cache_size``).
    :param destination: :func:`describe` of the destination, or None for a
        host without fcache (or whose agent did not answer).
    :param room: ``{'free_bytes': n}``, the destination's free flash still
        unclaimed by the instance's other volumes (dmcache); updated.
    :returns: an operator's message, or None.
    """
    if not source.get('cached'):
        return None
    policy = source['write_policy']
    if destination is None:
        if policy in NOTHING_DIRTY:
            return None
        return ('%s volume %s may hold dirty blocks only in this '
                'host\'s cache, and the destination cannot take the cache: '
                'it does not run fcache\'s driver ([DEFAULT] compute_driver '
                '= fcache.FcacheLibvirtDriver), or its fcache agent did not '
                'answer.  Migrated uncached, the guest would read stale data '
                'there and this host would later write those blocks over '
                'the guest\'s new writes.  Live-migrate it to a host running '
                'fcache, start the fcache agent on the destination, or '
                'detach the volume first (the detach writes its dirty blocks '
                'back)' % (policy, volume_id))
    host = destination.get('host') or 'the destination'
    engine = destination.get('engine')
    strategy = source['strategy']
    if engine == 'dmcache' and strategy in ON_DEMAND:
        return ('volume %s (%s) would migrate with strategy %s, which '
                'fetches blocks from the source\'s cache on demand; the '
                'fcache agent on %s runs engine dmcache, which cannot '
                '(doc/reference/dmcache.rst).  Use a volume type with '
                'fcache:strategy none, cachemior, firepan, firepan_if or '
                'auto, or choose a host whose agent runs ucache'
                % (volume_id, policy, strategy, host))
    size = source.get('cache_size') or 0
    capacity = destination.get('capacity_bytes')
    if capacity is not None and size > capacity:
        return ('volume %s (%s) has a cache of %d bytes; the fcache agent '
                'on %s has %d bytes of cache in all.  Choose a host with a '
                'larger cache device' % (volume_id, policy, size, host,
                                         capacity))
    free = room.get('free_bytes')
    if free is not None:
        # dmcache allocates each volume's cache from the flash at attach.
        if size > free:
            return ('volume %s (%s) has a cache of %d bytes; the fcache '
                    'agent on %s (engine %s) has %d bytes of flash free for '
                    'it.  Choose another host, or free flash there'
                    % (volume_id, policy, size, host, engine, free))
        room['free_bytes'] = free - size
    return None
