# SPDX-License-Identifier: Apache-2.0
"""Data written through a cached volume survives a live migration, warm.

For each strategy (``[fcache_feature_enabled]``): a volume type with
``fcache:`` specs, a server with a volume of that type attached, random
data written through the guest (its md5 known before it reaches the disk)
and read back through the source host's cache; then an administrator
live-migrates the server (``openstack server migrate --live``).  It must
end ACTIVE on another host with the migration completed, the guest must
read the same md5 past its page cache, and the agents must show the cache
moved: the volume cached on the new host with the type's policy, holding
blocks before the guest reads when the strategy warms the destination,
serving the read-back, and released on the old host.  The agent checks
run for the hosts ``[fcache] agent_sockets`` can reach from here.
"""

import time

from tempest.common import utils
from tempest import config
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from fcache_tempest_plugin.common import agent
from fcache_tempest_plugin.common import deployed
from fcache_tempest_plugin.common import guest
from fcache_tempest_plugin.common import scenario

CONF = config.CONF


class TestLiveMigrationWithHostCache(scenario.LiveMigrationScenario):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.validation.run_validation:
            raise cls.skipException('The data checks need SSH to the '
                                    'guest ([validation] run_validation)')

    def _new_disk(self, ssh, before):
        deadline = time.time() + CONF.compute.build_timeout
        while time.time() < deadline:
            new = set(ssh.list_disks()) - set(before)
            if new:
                return '/dev/' + new.pop()
            time.sleep(CONF.compute.build_interval)
        raise lib_exc.TimeoutException('the attached volume did not appear '
                                       'in the guest')

    def _boot_with_cached_volume(self, strategy):
        keypair = self.create_keypair()
        secgroup = self.create_security_group()
        server = self.create_server(
            key_name=keypair['name'],
            security_groups=[{'name': secgroup['name']}],
            wait_until='SSHABLE')
        ip = self.get_server_ip(server)
        ssh = self.get_remote_client(ip, private_key=keypair['private_key'],
                                     server=server)
        disks = ssh.list_disks()
        volume_type = self.create_volume_type(
            extra_specs=self._specs(strategy))
        volume = self.create_volume(volume_type=volume_type['name'])
        self.nova_volume_attach(server, volume)
        disk = guest.GuestDisk(ssh, self._new_disk(ssh, disks),
                               CONF.fcache.data_size_mb)
        return server, volume, disk

    def _live_migrate_with_data(self, strategy):
        deployed.skip_unless_strategy(self, strategy)
        server, volume, disk = self._boot_with_cached_volume(strategy)
        source = self.get_host_for_server(server['id'])

        known = disk.write_random()
        self.assertEqual(known, disk.read_checksum(),
                         'the data read back on %s differs' % source)
        before = agent.show_volume(source, volume['id'])
        self._check_cached_before(before, volume['id'], source)

        dest = self._live_migrate_away(server['id'], source)

        warm = agent.show_volume(dest, volume['id'])
        if warm is not None:
            self.assertNotEqual({}, warm, 'volume not cached on %s' % dest)
            self._check_policy(warm)
            if before and strategy in scenario.WARMING:
                self.assertGreater(warm['cached_blocks'], 0,
                                   '%s moved nothing to %s' % (strategy,
                                                               dest))

        self.assertEqual(known, disk.read_checksum(),
                         'the data read on %s after the live migration '
                         'differs from what was written on %s'
                         % (dest, source))

        if warm is not None:
            read = agent.show_volume(dest, volume['id'])
            self.assertGreater(read['reads'], warm['reads'],
                               'the guest did not read through the cache '
                               'on %s' % dest)
            if before and strategy in scenario.WARMING:
                self.assertGreater(read['read_hits'], warm['read_hits'],
                                   'no read hit the warmed cache on %s'
                                   % dest)
        released = agent.show_volume(source, volume['id'])
        if released is not None:
            self.assertEqual({}, released,
                             'the cache of volume %s stayed on %s'
                             % (volume['id'], source))

    @decorators.idempotent_id('b1dafad9-bcaf-46fe-9fdb-c5c899ff1105')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_live_migrate_hybrid(self):
        self._live_migrate_with_data('hybrid')

    @decorators.idempotent_id('6368e904-ca6d-4870-96cb-04810797b5d4')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_live_migrate_none(self):
        self._live_migrate_with_data('none')

    @decorators.idempotent_id('eb5d59aa-72ed-4ad3-b6f9-4e0b96b55f1f')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_live_migrate_cachemior(self):
        self._live_migrate_with_data('cachemior')

    @decorators.idempotent_id('0c09727a-80dc-4d6c-b093-ad6a3b6f03a5')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_live_migrate_firepan(self):
        self._live_migrate_with_data('firepan')

    @decorators.idempotent_id('203931fc-04f1-4507-8fde-a5b67aff2ba7')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_live_migrate_firepan_if(self):
        self._live_migrate_with_data('firepan_if')

    @decorators.idempotent_id('ab4b83ff-c591-4009-ae97-4babd06da8d0')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_live_migrate_cloudcache(self):
        self._live_migrate_with_data('cloudcache')

    @decorators.idempotent_id('5a8d81c6-01dd-443b-bb27-7efb9793cb4f')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_live_migrate_auto(self):
        self._live_migrate_with_data('auto')
