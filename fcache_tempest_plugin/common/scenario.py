# SPDX-License-Identifier: Apache-2.0
"""What fcache's live migration scenarios share.

Their checks before they run, the admin clients, the volume type of a
strategy, the cache policy an agent must report, and the migration Nova
records: whether the guest is reached by SSH (test_live_migration) or
reports on its console (test_console_live_migration).
"""

import time

from tempest.common import waiters
from tempest import config
from tempest.scenario import manager

from fcache_tempest_plugin.common import deployed
from nova_ext import units

CONF = config.CONF

# Strategies after which the destination holds cached blocks before the
# guest reads anything there.
WARMING = ('cachemior', 'firepan', 'firepan_if', 'cloudcache', 'hybrid')
# Nova's migration states before it is completed (or errored).
UNDERWAY = ('queued', 'preparing', 'running', 'post-migrating')


class LiveMigrationScenario(manager.ScenarioTest):

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

    def _specs(self, strategy):
        return {'cacheable': '<is> True',
                'fcache:strategy': strategy,
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

    def _check_cached_before(self, before, volume_id, source):
        """The source's agent caches the volume and served reads of it."""
        if before is None:
            return
        self.assertNotEqual({}, before, 'volume %s not cached on %s'
                            % (volume_id, source))
        self._check_policy(before)
        self.assertGreater(before['reads'], 0)

    def _live_migrate_away(self, server_id, source):
        """``openstack server migrate --live-migration``; the new host."""
        self.admin_servers_client.live_migrate_server(
            server_id, host=None, block_migration='auto')
        waiters.wait_for_server_status(self.servers_client, server_id,
                                       'ACTIVE')
        dest = self.get_host_for_server(server_id)
        self.assertNotEqual(source, dest)
        self._assert_migration_completed(server_id)
        return dest

    def _assert_migration_completed(self, server_id):
        """Nova marks it completed a moment after the server is ACTIVE."""
        deadline = time.time() + CONF.compute.build_timeout
        status = self._last_migration(server_id)['status']
        while status in UNDERWAY and time.time() < deadline:
            time.sleep(CONF.compute.build_interval)
            status = self._last_migration(server_id)['status']
        self.assertEqual('completed', status)
