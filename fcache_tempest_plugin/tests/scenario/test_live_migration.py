"""A server booted from a cached volume survives a live migration warm.

The volume type carries ``fcache:`` specs; the server boots from a volume
of that type (its guest reads its disk through the source host's agent),
is live-migrated by an administrator (``openstack server migrate --live``),
and must end ACTIVE on another host, with the migration completed, the
volume cached on the new host with the type's policy and released on the
old one.  The agent checks run for the hosts ``[fcache] agent_sockets``
can reach from here.
"""

from tempest.common import utils
from tempest.common import waiters
from tempest import config
from tempest.lib import decorators
from tempest.scenario import manager

from fcache_tempest_plugin.common import agent
from fcache_tempest_plugin.common import deployed
from nova_ext import units

CONF = config.CONF

# Strategies after which the destination holds the source's cached blocks.
WARMING = ('cachemior', 'firepan', 'firepan_if', 'cloudcache', 'hybrid')


class TestLiveMigrationWithHostCache(manager.ScenarioTest):

    credentials = ['primary', 'admin']

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        deployed.skip_unless_deployed(cls)
        if not CONF.service_available.cinder:
            raise cls.skipException('Cinder is not available')
        if not CONF.compute_feature_enabled.live_migration:
            raise cls.skipException('Live migration is not enabled')
        if CONF.compute.min_compute_nodes < 2:
            raise cls.skipException('Live migration needs at least 2 '
                                    'compute hosts')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.admin_servers_client = cls.os_admin.servers_client
        cls.admin_migrations_client = cls.os_admin.migrations_client

    def _specs(self):
        return {'cacheable': '<is> True',
                'fcache:strategy': CONF.fcache.strategy,
                'fcache:cache_size': CONF.fcache.cache_size,
                'fcache:write_policy': CONF.fcache.write_policy}

    def _check_policy(self, vol):
        self.assertEqual(units.parse_size(CONF.fcache.cache_size),
                         vol['cache_size'])
        self.assertEqual(CONF.fcache.write_policy, vol['write_policy'])

    def _last_migration(self, server_id):
        migrations = [
            m for m in self.admin_migrations_client.list_migrations(
                instance_uuid=server_id)['migrations']
            if m['instance_uuid'] == server_id]
        self.assertNotEqual([], migrations, 'no migration of %s' % server_id)
        return max(migrations, key=lambda m: m['id'])

    @decorators.idempotent_id('b1dafad9-bcaf-46fe-9fdb-c5c899ff1105')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_live_migrate_server_with_cached_volume(self):
        volume_type = self.create_volume_type(extra_specs=self._specs())
        volume = self.create_volume_from_image(
            volume_type=volume_type['name'])
        server = self.boot_instance_from_resource(
            source_id=volume['id'], source_type='volume',
            wait_until='ACTIVE')
        source = self.get_host_for_server(server['id'])
        before = agent.show_volume(source, volume['id'])
        if before is not None:
            self.assertNotEqual({}, before,
                                'volume not cached on %s' % source)
            self._check_policy(before)

        self.admin_servers_client.live_migrate_server(
            server['id'], host=None, block_migration='auto')
        waiters.wait_for_server_status(self.servers_client, server['id'],
                                       'ACTIVE')

        dest = self.get_host_for_server(server['id'])
        self.assertNotEqual(source, dest)
        self.assertEqual('completed',
                         self._last_migration(server['id'])['status'])
        after = agent.show_volume(dest, volume['id'])
        if after is not None:
            self.assertNotEqual({}, after, 'volume not cached on %s' % dest)
            self._check_policy(after)
            if before and CONF.fcache.strategy in WARMING:
                self.assertGreater(after['cached_blocks'], 0)
        released = agent.show_volume(source, volume['id'])
        if released is not None:
            self.assertEqual({}, released,
                             'the cache of volume %s stayed on %s'
                             % (volume['id'], source))
