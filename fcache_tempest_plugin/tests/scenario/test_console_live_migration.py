# SPDX-License-Identifier: Apache-2.0
"""A volume-backed server's cache across a live migration, without network.

For each strategy (``[fcache_feature_enabled]``), on a cloud whose image is
fcache-guest (``[fcache] guest_console``; tools/cloud.sh builds it): a
volume type with the strategy's ``fcache:`` specs, a server booted from a
volume of that type made from the image (``--nic none``: no Neutron port,
no SSH), and the guest's own report on its serial console of the data it
wrote onto the volume and of every read-back.  An administrator then
live-migrates the server (``openstack server migrate --live-migration``).
It must end ACTIVE on the other host with the migration completed; every
read the guest makes there must return the data it wrote on the source;
and the agents must show the cache moved: the volume cached on the new
host with the type's policy, its reads there hitting the cache when the
strategy warms the destination (the hit ratio after the switch is logged),
and nothing left on the old host.
"""

import time

from oslo_log import log as logging
from tempest.common import utils
from tempest.common import waiters
from tempest import config
from tempest.lib.common import api_microversion_fixture
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators

from fcache_tempest_plugin.common import agent
from fcache_tempest_plugin.common import console
from fcache_tempest_plugin.common import deployed
from fcache_tempest_plugin.common import scenario

CONF = config.CONF
LOG = logging.getLogger(__name__)

# 2.37: networks "none"; 2.67: a volume type in a block device mapping.
MICROVERSION = '2.67'


class _ConsoleLiveMigration(scenario.LiveMigrationScenario):
    """The scenario; one class per strategy, so that they run in parallel."""

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.fcache.guest_console:
            raise cls.skipException('the image is not fcache-guest '
                                    '([fcache] guest_console)')

    def setUp(self):
        super().setUp()
        self.useFixture(api_microversion_fixture.APIMicroversionFixture(
            compute_microversion=MICROVERSION))

    def _volume_type(self, strategy):
        return self.create_volume_type(extra_specs=self._specs(strategy))

    def _boot(self, volume_type):
        bdm = [{'uuid': CONF.compute.image_ref, 'source_type': 'image',
                'destination_type': 'volume', 'boot_index': 0,
                'volume_size': CONF.volume.volume_size,
                'volume_type': volume_type['name'],
                'delete_on_termination': True}]
        body = self.servers_client.create_server(
            name=data_utils.rand_name(self.__class__.__name__),
            flavorRef=CONF.compute.flavor_ref, imageRef='',
            block_device_mapping_v2=bdm, networks='none')['server']
        # Cleanups run last first: the server goes, then Nova's deletion of
        # its volume is waited out, then the type goes.  The server is gone
        # from the API while Nova still deletes the volume; the type's
        # cleanup would then delete it too, and Cinder refuses a volume
        # already deleting (400).
        boot_volume = []
        self.addCleanup(self._wait_for_volume_deletion, boot_volume)
        self.addCleanup(waiters.wait_for_server_termination,
                        self.servers_client, body['id'])
        self.addCleanup(self.servers_client.delete_server, body['id'])
        waiters.wait_for_server_status(self.servers_client, body['id'],
                                       'ACTIVE')
        server = self.servers_client.show_server(body['id'])['server']
        boot_volume.append(self._volume_id(server))
        return server

    def _wait_for_volume_deletion(self, volume_ids):
        for volume_id in volume_ids:
            self.os_admin.volumes_client_latest.wait_for_resource_deletion(
                volume_id)

    def _volume_id(self, server):
        attached = server['os-extended-volumes:volumes_attached']
        self.assertEqual(1, len(attached), attached)
        return attached[0]['id']

    def _live_migrate(self, strategy):
        deployed.skip_unless_strategy(self, strategy)
        server = self._boot(self._volume_type(strategy))
        volume_id = self._volume_id(server)
        source = self.get_host_for_server(server['id'])
        guest = console.Console(self.servers_client, server['id'],
                                CONF.compute.build_timeout,
                                CONF.compute.build_interval)

        written, report = guest.wait_written()
        for seq, got, _ in report.reads:
            self.assertEqual(written, got, 'read %d on %s returned other '
                             'data than the guest wrote' % (seq, source))
        before = agent.show_volume(source, volume_id)
        self._check_cached_before(before, volume_id, source)

        dest = self._live_migrate_away(server['id'], source)
        switched = guest.report().last_seq
        warm = agent.show_volume(dest, volume_id)

        # Two whole reads that began after the migration completed.
        after = guest.reads_after(switched + 1)
        for seq, got, ms in after:
            self.assertEqual(written, got, 'read %d on %s returned other '
                             'data than the guest wrote on %s'
                             % (seq, dest, source))

        if warm is not None:
            self.assertNotEqual({}, warm, 'volume %s not cached on %s'
                                % (volume_id, dest))
            self._check_policy(warm)
            read = agent.show_volume(dest, volume_id)
            self.assertGreater(read['reads'], warm['reads'], 'the guest '
                               'did not read through the cache on %s' % dest)
            # Every read the destination's agent served came after the
            # switch: its counters (blocks) are the warm-up.  A cold start
            # fetches the guest's whole data from shared storage once.
            hits, misses = read['read_hits'], read['read_misses']
            data_blocks = (report.written_mib << 20) // read['block_size']
            LOG.info('fcache %s: %d of %d blocks read on %s after the '
                     'switch hit the cache (%.0f %%), %d of the guest\'s %d '
                     'missed; read-back %s ms', strategy, hits,
                     hits + misses, dest, 100.0 * hits / max(1, hits + misses),
                     misses, data_blocks, [ms for _, _, ms in after])
            if strategy in scenario.WARMING:
                self.assertGreater(warm['cached_blocks'], 0,
                                   '%s moved nothing to %s'
                                   % (strategy, dest))
                self.assertLess(misses, data_blocks, '%s: the guest read '
                                'its whole data from shared storage after '
                                'the switch, as with a cold cache'
                                % strategy)
            elif strategy == 'none':
                self.assertGreaterEqual(misses, data_blocks, 'none: the '
                                        'destination\'s cache was not cold')
        released = agent.show_volume(source, volume_id)
        if released is not None:
            deadline = time.time() + CONF.compute.build_timeout
            while released and time.time() < deadline:
                time.sleep(CONF.compute.build_interval)
                released = agent.show_volume(source, volume_id)
            self.assertEqual({}, released, 'the cache of volume %s stayed '
                             'on %s' % (volume_id, source))


class TestConsoleLiveMigrationNone(_ConsoleLiveMigration):

    @decorators.idempotent_id('0d6f1c56-8b0e-4c43-9b53-2f3b8d0f7a01')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_console_live_migrate_none(self):
        self._live_migrate('none')


class TestConsoleLiveMigrationCachemior(_ConsoleLiveMigration):

    @decorators.idempotent_id('0d6f1c56-8b0e-4c43-9b53-2f3b8d0f7a02')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_console_live_migrate_cachemior(self):
        self._live_migrate('cachemior')


class TestConsoleLiveMigrationFirepan(_ConsoleLiveMigration):

    @decorators.idempotent_id('0d6f1c56-8b0e-4c43-9b53-2f3b8d0f7a03')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_console_live_migrate_firepan(self):
        self._live_migrate('firepan')


class TestConsoleLiveMigrationFirepanIf(_ConsoleLiveMigration):

    @decorators.idempotent_id('0d6f1c56-8b0e-4c43-9b53-2f3b8d0f7a04')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_console_live_migrate_firepan_if(self):
        self._live_migrate('firepan_if')


class TestConsoleLiveMigrationCloudcache(_ConsoleLiveMigration):

    @decorators.idempotent_id('0d6f1c56-8b0e-4c43-9b53-2f3b8d0f7a05')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_console_live_migrate_cloudcache(self):
        self._live_migrate('cloudcache')


class TestConsoleLiveMigrationHybrid(_ConsoleLiveMigration):

    @decorators.idempotent_id('0d6f1c56-8b0e-4c43-9b53-2f3b8d0f7a06')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_console_live_migrate_hybrid(self):
        self._live_migrate('hybrid')


class TestConsoleLiveMigrationAuto(_ConsoleLiveMigration):

    @decorators.idempotent_id('0d6f1c56-8b0e-4c43-9b53-2f3b8d0f7a07')
    @decorators.attr(type='slow')
    @utils.services('compute', 'volume', 'image')
    def test_console_live_migrate_auto(self):
        self._live_migrate('auto')
