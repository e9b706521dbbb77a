# SPDX-License-Identifier: Apache-2.0
"""Where the balancer reads each host's cache capacity and demand.

Sources are stevedore plugins in the namespace :data:`NAMESPACE`, chosen
by ``[fcache_balancer] source``.  A source returns, for every host it
knows, a :class:`HostLoad`: the agent's cache capacity, its allocation
window and, per cached volume (the Cinder volume id), the figures of
:class:`nova_ext.balancer.model.Volume`.

The built-in ``sockets`` source talks to each host's agent over its
control socket, from ``[fcache_balancer] agent_sockets``
(``host:/path/to/ctl.sock,...``).  Agents listen on a local unix socket
only, so the sockets must be reachable from where the balancer runs: on
one machine (tests, a single-node cloud) directly; across hosts through a
forwarded socket per compute (``ssh -L /run/fcache-balancer/HOST.sock:
/run/fcache/agent.sock HOST``, or socat) -- doc/reference/balancing.rst.  A
deployment with a telemetry pipeline can plug in its own source instead.
"""

import abc
import logging

from stevedore import driver as stevedore_driver
from stevedore import exception as stevedore_exception

from nova_ext import agent
from nova_ext.balancer import model
from nova_ext import exception

LOG = logging.getLogger(__name__)

NAMESPACE = 'fcache.balancer.sources'


class HostLoad(object):
    """One host's cache: capacity, window and volumes (by volume id)."""

    __slots__ = ('host', 'capacity_bytes', 'window_s', 'volumes')

    def __init__(self, host, capacity_bytes, window_s=None, volumes=None):
        self.host = host
        self.capacity_bytes = int(capacity_bytes or 0)
        self.window_s = window_s
        self.volumes = dict(volumes or {})

    @property
    def demand_bytes(self):
        return sum(v.demand_bytes for v in self.volumes.values())

    def __repr__(self):
        return 'HostLoad(%r, capacity=%d, demand=%d, %d volumes)' % (
            self.host, self.capacity_bytes, self.demand_bytes,
            len(self.volumes))


class SourceError(exception.FcacheException):
    msg_fmt = 'cache load of host %(host)s unavailable: %(reason)s'


class HostLoadSource(metaclass=abc.ABCMeta):
    """A source of host loads; instantiated with the ``ConfigOpts``."""

    def __init__(self, conf):
        self.conf = conf

    @abc.abstractmethod
    def hosts(self):
        """Return the names of the hosts this source reports on."""

    @abc.abstractmethod
    def load(self, host):
        """Return the :class:`HostLoad` of ``host``.

        :raises SourceError: the host's figures cannot be read now (the
            balancer leaves the host out of this window and goes on).
        """

    def agent(self, host):
        """Return an agent client for ``host``, or None if unreachable.

        ``fcache evacuate`` hands each volume's planned strategy to the
        source host's agent through it (``volume-hint``).
        """
        return None

    def loads(self):
        """Return ``({host: HostLoad}, {host: error message})``."""
        loads, errors = {}, {}
        for host in self.hosts():
            try:
                loads[host] = self.load(host)
            except exception.FcacheException as exc:
                LOG.warning('%s', exc)
                errors[host] = str(exc)
        return loads, errors


def demand_of(entry):
    """A volume's demand from its ``allocation`` entry.

    The predicted RWSS once a window has closed; before that the observed
    one, else what the volume holds now.
    """
    for key in ('rwss_predicted_bytes', 'rwss_observed_bytes',
                'used_bytes'):
        if entry.get(key) is not None:
            return int(entry[key])
    return 0


def volume_from_agent(entry, shown):
    """A :class:`~nova_ext.balancer.model.Volume` from the agent's figures.

    :param entry: the volume's entry of ``allocation``.
    :param shown: its ``volume-show`` (or None if it vanished meanwhile).
    """
    shown = shown or {}
    block = int(shown.get('block_size') or 4096)
    return model.Volume(
        entry['id'], demand_bytes=demand_of(entry),
        cached_bytes=int(shown.get('cached_blocks') or 0) * block,
        dirty_bytes=int(shown.get('dirty_blocks') or 0) * block,
        block_size=block, engine=shown.get('engine') or 'ucache')


def load_from_agent(host, client):
    """Read one host's :class:`HostLoad` through an :class:`AgentClient`.

    :raises SourceError: the agent is unreachable or answers nonsense.
    """
    try:
        alloc = client.allocation()
        volumes = {}
        for entry in alloc.get('volumes') or []:
            try:
                shown = client.show_volume(entry['id'])
            except exception.AgentError:
                # Detached between the two requests: no longer here.
                continue
            volumes[entry['id']] = volume_from_agent(entry, shown)
    except exception.FcacheException as exc:
        raise SourceError(host=host, reason=exc)
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(host=host, reason='unexpected allocation answer '
                          'from %s: %r' % (client.socket_path, exc))
    return HostLoad(host, alloc.get('capacity_bytes'),
                    alloc.get('window_s'), volumes)


class SocketsSource(HostLoadSource):
    """Each host's agent through a control socket reachable from here."""

    def __init__(self, conf):
        super().__init__(conf)
        group = conf.fcache_balancer
        self.sockets = dict(group.agent_sockets or {})
        self.timeout = group.agent_timeout
        if not self.sockets:
            raise exception.InvalidArgument(
                name='[fcache_balancer] agent_sockets', value='',
                reason='the sockets source needs host:socket pairs, one per '
                       'compute host of the agents to balance')

    def hosts(self):
        return sorted(self.sockets)

    def agent(self, host):
        if host not in self.sockets:
            return None
        return agent.AgentClient(self.sockets[host], timeout=self.timeout)

    def load(self, host):
        return load_from_agent(host, self.agent(host))


def load_source(conf):
    """Instantiate the source named by ``[fcache_balancer] source``."""
    name = conf.fcache_balancer.source
    try:
        mgr = stevedore_driver.DriverManager(
            NAMESPACE, name, invoke_on_load=True, invoke_args=(conf,))
    except stevedore_exception.NoMatches:
        raise exception.InvalidArgument(
            name='[fcache_balancer] source', value=name,
            reason='no such plugin in the %s entry point namespace (is the '
                   'package that provides it installed?)' % NAMESPACE)
    return mgr.driver
