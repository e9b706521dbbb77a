# SPDX-License-Identifier: Apache-2.0
"""The balancer's window on Nova: servers, computes, live migrations.

Everything goes through python-novaclient against the compute API (the
calls an operator makes with ``openstack server list --all-projects``,
``openstack compute service list`` and ``openstack server migrate --live
HOST``), authenticated from clouds.yaml, the OS_* variables or the
``[nova]`` group of the balancer's configuration (:mod:`credentials`).
Every failure is raised as :class:`NovaError`, whose
message names the call, Nova's answer and its request id.
"""

import logging

from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import loading as ks_loading

from nova_ext.balancer import opts
from nova_ext import exception

LOG = logging.getLogger(__name__)

HOST_ATTR = 'OS-EXT-SRV-ATTR:host'
TASK_ATTR = 'OS-EXT-STS:task_state'
VOLUMES_ATTR = 'os-extended-volumes:volumes_attached'


class NovaError(exception.FcacheException):
    msg_fmt = 'Nova API: %(call)s failed: %(reason)s'


class Server(object):
    """What the balancer needs of one Nova server."""

    __slots__ = ('id', 'name', 'host', 'status', 'task_state', 'volume_ids')

    def __init__(self, id, name, host, status, task_state, volume_ids):
        self.id = id
        self.name = name
        self.host = host
        self.status = status
        self.task_state = task_state
        self.volume_ids = list(volume_ids)

    @property
    def migrating(self):
        """Nova is moving it, or doing anything else to it."""
        return self.status == 'MIGRATING' or self.task_state is not None

    def __repr__(self):
        return 'Server(%r, host=%r, %s/%s)' % (self.id, self.host,
                                               self.status, self.task_state)


def session_from_conf(conf):
    """A keystoneauth session from ``[nova]`` (auth_type and friends)."""
    auth = ks_loading.load_auth_from_conf_options(conf,
                                                  opts.NOVA_GROUP_NAME)
    return ks_loading.load_session_from_conf_options(
        conf, opts.NOVA_GROUP_NAME, auth=auth)


def _describe(exc):
    code = getattr(exc, 'code', None) or getattr(exc, 'http_status', None)
    rid = getattr(exc, 'request_id', None)
    text = getattr(exc, 'message', None) or str(exc)
    parts = [str(text)]
    if code:
        parts.insert(0, 'HTTP %s' % code)
    if rid:
        parts.append('(request %s)' % rid)
    return ' '.join(parts)


class NovaView(object):
    """Servers, computes and live migrations through a novaclient."""

    def __init__(self, client):
        self.client = client

    @classmethod
    def from_session(cls, session, version='2.60', **kwargs):
        from novaclient import client as nova_client
        return cls(nova_client.Client(version, session=session, **kwargs))

    @classmethod
    def from_conf(cls, conf, credentials=None):
        """From ``credentials`` (clouds.yaml or OS_*), else ``[nova]``."""
        if credentials is not None:
            session, kwargs = credentials.nova_kwargs()
            return cls.from_session(session,
                                    conf.fcache_balancer.nova_api_version,
                                    **kwargs)
        group = getattr(conf, opts.NOVA_GROUP_NAME)
        kwargs = {}
        if group.region_name:
            kwargs['region_name'] = group.region_name
        if group.valid_interfaces:
            kwargs['endpoint_type'] = group.valid_interfaces[0]
        if group.endpoint_override:
            kwargs['endpoint_override'] = group.endpoint_override
        return cls.from_session(session_from_conf(conf),
                                conf.fcache_balancer.nova_api_version,
                                **kwargs)

    def _call(self, what, fn, *args, **kwargs):
        from novaclient import exceptions as nova_exceptions
        try:
            return fn(*args, **kwargs)
        except (nova_exceptions.ClientException,
                ks_exceptions.ClientException) as exc:
            raise NovaError(call=what, reason=_describe(exc))

    def servers(self, host=None):
        """Every server (all projects), or those of ``host``."""
        search = {'all_tenants': True}
        if host:
            search['host'] = host
        found = self._call('server list', self.client.servers.list,
                           detailed=True, search_opts=search)
        return [Server(s.id, getattr(s, 'name', None),
                       getattr(s, HOST_ATTR, None), s.status,
                       getattr(s, TASK_ATTR, None),
                       [v['id'] for v in getattr(s, VOLUMES_ATTR, [])])
                for s in found]

    def server(self, server_id):
        s = self._call('server show %s' % server_id,
                       self.client.servers.get, server_id)
        return Server(s.id, getattr(s, 'name', None),
                      getattr(s, HOST_ATTR, None), s.status,
                      getattr(s, TASK_ATTR, None),
                      [v['id'] for v in getattr(s, VOLUMES_ATTR, [])])

    def compute_hosts(self):
        """``{host: True if it may receive VMs (enabled and up)}``."""
        services = self._call('compute service list',
                              self.client.services.list,
                              binary='nova-compute')
        return {s.host: s.status == 'enabled' and s.state == 'up'
                for s in services}

    def live_migrate(self, server_id, host):
        """``os-migrateLive`` to ``host`` (Nova's scheduler checks it)."""
        LOG.info('live-migrating server %s to %s', server_id, host)
        self._call('live migration of server %s to %s' % (server_id, host),
                   self.client.servers.live_migrate, server_id, host,
                   block_migration='auto')

    def last_migration(self, server_id):
        """Status of the server's most recent migration, or None."""
        migrations = self._call(
            'migration list of server %s' % server_id,
            self.client.migrations.list, instance_uuid=server_id)
        if not migrations:
            return None
        last = max(migrations, key=lambda m: (m.created_at or '', m.id))
        return {'id': last.id, 'status': last.status,
                'source': getattr(last, 'source_compute', None),
                'destination': getattr(last, 'dest_compute', None)}
