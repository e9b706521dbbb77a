"""FcacheLibvirtDriver's hooks, LibvirtDriver's own part mocked.

The driver runs here with Nova's fake libvirt (``LibvirtFixture``), and
its agent is a mock: what is checked is what the hooks decide and hand
over to LibvirtDriver.

Nova's libvirt unit tests (:mod:`tests.nova_unit.test_libvirt_driver`)
hand the driver what Nova's interface allows, not only what a live
nova-compute happens to pass: migrate data whose ``bdms`` was never set,
and connection_info that is not a dict; the driver must then do what
LibvirtDriver does.  A mixed fleet (:mod:`nova_ext.virt.capability`): the
live-migration checks, ``live_migration`` refusing a write_back volume
the destination did not prepare, and the disk's type in the destination's
domain XML when the volume arrives there uncached.
"""

import nova.monkey_patch  # noqa: F401  (Nova: first, before anything else)

import errno
from unittest import mock

import fixtures
from lxml import etree
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import utils as compute_utils
from nova import context
from nova import exception as nova_exception
from nova import objects
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.unit import fake_instance
from nova.virt import fake
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import migration as libvirt_migrate

from nova_ext import exception
from nova_ext.virt import channel
from nova_ext.virt import disk
from nova_ext.virt import driver as fcache_driver

# Nova's class itself, even where tests.nova_unit.test_libvirt_driver has
# put another one in nova.virt.libvirt.driver.LibvirtDriver.
NOVA_DRIVER = fcache_driver.FcacheLibvirtDriver.__bases__[-1]


class _DriverTest(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtFixture())
        self.context = context.get_admin_context()
        self.instance = fake_instance.fake_instance_obj(self.context,
                                                        host='src')
        self.drvr = fcache_driver.FcacheLibvirtDriver(fake.FakeVirtAPI(),
                                                      False)


class MigrateDataWithoutBdmsTest(_DriverTest):
    """Nova's migrate data need not carry ``bdms`` (an unset field)."""

    def test_no_outgoing_cache_migration(self):
        migrate_data = objects.LibvirtLiveMigrateData()
        self.assertFalse(migrate_data.obj_attr_is_set('bdms'))
        self.assertEqual([], channel.outgoing(migrate_data))
        self.assertEqual({}, channel.read_sources(migrate_data))

    def test_live_migration_is_nova_s(self):
        migrate_data = objects.LibvirtLiveMigrateData()
        post, recover = mock.Mock(), mock.Mock()
        with mock.patch.object(NOVA_DRIVER, 'live_migration') as live:
            self.drvr.live_migration(self.context, self.instance, 'dest',
                                     post, recover,
                                     migrate_data=migrate_data)
        live.assert_called_once_with(self.context, self.instance, 'dest',
                                     post, recover, False, migrate_data)

    def test_live_migration_operation_is_nova_s(self):
        migrate_data = objects.LibvirtLiveMigrateData()
        guest = mock.Mock()
        with mock.patch.object(NOVA_DRIVER,
                               '_live_migration_operation') as operation:
            self.drvr._live_migration_operation(
                self.context, self.instance, 'dest', False, migrate_data,
                guest, [])
        operation.assert_called_once_with(
            self.context, self.instance, 'dest', False, migrate_data,
            guest, [])


class ConnectionInfoNotADictTest(_DriverTest):
    """connection_info that is not a mapping is not a volume fcache serves."""

    def test_swap_volume_is_nova_s(self):
        with mock.patch.object(NOVA_DRIVER, 'swap_volume') as swap:
            self.drvr.swap_volume(self.context, uuids.old_connection_info,
                                  uuids.new_connection_info, self.instance,
                                  '/dev/vdb', None)
        swap.assert_called_once_with(
            self.context, uuids.old_connection_info,
            uuids.new_connection_info, self.instance, '/dev/vdb', None)

    def test_disconnect_volume_is_nova_s(self):
        info = mock.Mock()
        with mock.patch.object(NOVA_DRIVER, '_disconnect_volume') as disc, \
                mock.patch.object(self.drvr, '_local_agent') as agent:
            self.drvr._disconnect_volume(self.context, info, self.instance)
        agent.assert_not_called()
        disc.assert_called_once_with(self.context, info, self.instance,
                                     encryption=None, destroy_secrets=True,
                                     force=False)

    def test_get_volume_config_is_nova_s(self):
        conf = mock.sentinel.conf
        with mock.patch.object(NOVA_DRIVER, '_get_volume_config',
                               return_value=conf):
            self.assertIs(conf, self.drvr._get_volume_config(
                uuids.connection_info, {}))


VOLUME = uuids.volume
MiB = 1 << 20


def _cached_bdm(write_policy):
    """A driver BDM of a volume this host's agent serves."""
    return {'connection_info': {
        'driver_volume_type': 'iscsi', 'serial': VOLUME,
        'data': {'volume_id': VOLUME, 'cacheable': True,
                 'device_path': '/dev/sdb',
                 'fcache': {'strategy': 'firepan',
                            'write_policy': write_policy},
                 'fcache_export': 'nbd+unix:///%s?socket=/e.sock' % VOLUME}}}


def _shown(write_policy):
    return {'volume_id': VOLUME, 'write_policy': write_policy,
            'cache_size': 16 * MiB, 'block_size': 4096, 'cached_blocks': 8,
            'dirty_blocks': 4 if write_policy == 'write_back' else 0,
            'admission': 'all'}


class MixedFleetCheckTest(_DriverTest):
    """The live-migration checks of a fleet with hosts without fcache."""

    def setUp(self):
        super().setUp()
        self.agent = mock.Mock()
        self.useFixture(fixtures.MockPatchObject(
            self.drvr, '_local_agent', return_value=self.agent))

    def _dest_check_data(self):
        return objects.LibvirtLiveMigrateData(filename='f',
                                              block_migration=False)

    def _check_source(self, dest_check_data, write_policy):
        self.agent.show_volume.return_value = _shown(write_policy)
        with mock.patch.object(NOVA_DRIVER, 'check_can_live_migrate_source',
                               return_value=dest_check_data):
            return self.drvr.check_can_live_migrate_source(
                self.context, self.instance, dest_check_data,
                block_device_info={'block_device_mapping': [
                    _cached_bdm(write_policy)]})

    def test_destination_describes_itself_when_its_agent_answers(self):
        self.agent.status.return_value = {
            'version': '1', 'engine': 'ucache', 'capacity_bytes': 64 * MiB}
        with mock.patch.object(NOVA_DRIVER,
                               'check_can_live_migrate_destination',
                               return_value=self._dest_check_data()):
            data = self.drvr.check_can_live_migrate_destination(
                self.context, self.instance, {}, {})
        self.assertEqual({'host': self.drvr._fcache_hostname,
                          'version': '1', 'engine': 'ucache',
                          'capacity_bytes': 64 * MiB, 'free_bytes': None},
                         channel.take_destination(data))
        self.assertNotIn('bdms', data)

    def test_destination_without_agent_says_nothing(self):
        self.agent.status.side_effect = exception.AgentUnreachable(
            path='/run/fcache/agent.sock', reason='ENOENT')
        with mock.patch.object(NOVA_DRIVER,
                               'check_can_live_migrate_destination',
                               return_value=self._dest_check_data()):
            data = self.drvr.check_can_live_migrate_destination(
                self.context, self.instance, {}, {})
        self.assertNotIn('bdms', data)

    def test_write_back_to_a_host_without_fcache_is_refused(self):
        exc = self.assertRaises(
            nova_exception.MigrationPreCheckError, self._check_source,
            self._dest_check_data(), 'write_back')
        self.assertIn('fcache: write_back volume %s may hold dirty blocks '
                      'only in this host\'s cache' % VOLUME, str(exc))

    def test_write_through_to_a_host_without_fcache_migrates(self):
        result = self._check_source(self._dest_check_data(),
                                    'write_through')
        self.assertEqual({VOLUME}, set(channel.read_sources(result)))

    def test_write_back_to_an_fcache_host_migrates(self):
        data = self._dest_check_data()
        channel.offer_destination(data, {'host': 'dest', 'engine': 'ucache',
                                         'capacity_bytes': 64 * MiB})
        result = self._check_source(data, 'write_back')
        # The destination's description does not travel on.
        source = channel.read_sources(result)[VOLUME]
        self.assertEqual(('write_back', 'firepan'),
                         (source['write_policy'], source['strategy']))
        self.assertEqual([VOLUME], [b.serial for b in result.bdms])

    def test_no_room_at_the_fcache_host_is_refused(self):
        data = self._dest_check_data()
        channel.offer_destination(data, {'host': 'dest', 'engine': 'ucache',
                                         'capacity_bytes': 8 * MiB})
        exc = self.assertRaises(
            nova_exception.MigrationPreCheckError, self._check_source,
            data, 'write_through')
        self.assertIn('the fcache agent on dest has 8388608 bytes', str(exc))


class LeftBehindTest(_DriverTest):
    """live_migration refuses what the check should have refused."""

    def setUp(self):
        super().setUp()
        self.agent = mock.Mock()
        self.useFixture(fixtures.MockPatchObject(
            self.drvr, '_local_agent', return_value=self.agent))

    def _migrate(self, write_policy, **connection_data):
        """A plain destination's answer: every volume, none prepared."""
        self.agent.show_volume.return_value = _shown(write_policy)
        data = dict({'volume_id': VOLUME, 'cacheable': True},
                    **connection_data)
        migrate_data = objects.LibvirtLiveMigrateData(bdms=[
            objects.LibvirtLiveMigrateBDMInfo(
                serial=VOLUME, connection_info={'serial': VOLUME,
                                                'data': data})])
        post, recover = mock.Mock(), mock.Mock()
        with mock.patch.object(NOVA_DRIVER, 'live_migration') as live, \
                mock.patch.object(compute_utils,
                                  'add_instance_fault_from_exc') as fault:
            self.drvr.live_migration(self.context, self.instance, 'dest',
                                     post, recover,
                                     migrate_data=migrate_data)
        return live, recover, fault

    def test_write_back_not_prepared_rolls_back(self):
        live, recover, fault = self._migrate('write_back')
        live.assert_not_called()
        recover.assert_called_once_with(self.context, self.instance, 'dest',
                                        mock.ANY)
        self.assertIn('did not prepare the cache of write_back volume(s) %s'
                      % VOLUME, str(fault.call_args[0][2]))

    def test_write_through_not_prepared_migrates(self):
        live, recover, fault = self._migrate('write_through')
        live.assert_called_once()
        recover.assert_not_called()
        fault.assert_not_called()

    def test_not_cached_here_migrates(self):
        self.agent.show_volume.side_effect = exception.AgentError(
            error='volume is not attached', errno=errno.ENOENT)
        live, recover, _ = self._migrate('write_back')
        live.assert_called_once()
        recover.assert_not_called()

    def test_agent_that_cannot_tell_rolls_back(self):
        self.agent.show_volume.side_effect = exception.AgentUnreachable(
            path='/run/fcache/agent.sock', reason='ECONNREFUSED')
        live, recover, _ = self._migrate('write_back')
        live.assert_not_called()
        recover.assert_called_once()

    def test_prepared_volumes_are_not_left_behind(self):
        self.assertEqual([], self.drvr._fcache_left_behind(
            self.instance, objects.LibvirtLiveMigrateData(bdms=[
                objects.LibvirtLiveMigrateBDMInfo(
                    serial=VOLUME, connection_info={'data': {
                        'cacheable': True, 'fcache_migration': {
                            'volume_id': VOLUME}}})]),
            [{'volume_id': VOLUME}]))
        self.agent.show_volume.assert_not_called()


class DestinationDiskTypeTest(_DriverTest):
    """A volume disk that changes kind on the way keeps a valid type."""

    def _source_domain(self):
        conf = vconfig.LibvirtConfigGuestDisk()
        conf.source_type = 'block'
        conf.source_path = '/dev/sdb'
        conf.driver_name = 'qemu'
        conf.driver_format = 'raw'
        conf.target_dev = 'vda'
        conf.target_bus = 'virtio'
        conf.serial = VOLUME
        conf = disk.point_at_export(
            conf, 'nbd+unix:///%s?socket=/run/fcache/exports/v.sock' % VOLUME)
        return '<domain><devices>%s</devices></domain>' % conf.to_xml()

    def _plain_destination(self):
        """What a plain LibvirtDriver answers from pre_live_migration."""
        return objects.LibvirtLiveMigrateData(bdms=[
            objects.LibvirtLiveMigrateBDMInfo(
                serial=VOLUME, bus='virtio', dev='vda', type='disk',
                format=None, boot_index=0, connection_info={
                    'driver_volume_type': 'iscsi', 'serial': VOLUME,
                    'data': {'volume_id': VOLUME, 'cacheable': True,
                             'device_path': '/dev/sdc'}})])

    def test_nova_keeps_the_source_type_and_fcache_sets_it(self):
        migrate_data = self._plain_destination()
        doc = etree.XML(self._source_domain())
        libvirt_migrate._update_volume_xml(doc, migrate_data, self.instance,
                                           self.drvr._get_volume_config)
        merged = etree.tostring(doc, encoding='unicode')
        # Nova's merge: the destination's source, the source's disk type.
        self.assertIn('<disk type="network" device="disk">', merged)
        self.assertIn('<source dev="/dev/sdc"/>', merged)

        guest = mock.Mock()
        with mock.patch.object(NOVA_DRIVER,
                               '_live_migration_operation') as operation:
            self.drvr._live_migration_operation(
                self.context, self.instance, 'dest', False, migrate_data,
                guest, [])
        migrating = operation.call_args[0][5]
        migrating.migrate('qemu+tcp://dest/system', destination_xml=merged,
                          flags=0)
        sent = guest.migrate.call_args[1]['destination_xml']
        self.assertIn('<disk type="block" device="disk">', sent)
        self.assertIn('<source dev="/dev/sdc"/>', sent)
        self.assertNotIn('nbd', sent)


class VolumeFormatTest(_DriverTest):
    """A cacheable NFS volume kept as a qcow2 file is refused, clearly."""

    def _nfs(self, volume_format):
        return {'driver_volume_type': 'nfs', 'serial': VOLUME,
                'data': {'volume_id': VOLUME, 'cacheable': True,
                         'device_path': '/var/lib/nova/mnt/abc/volume-1',
                         'format': volume_format,
                         'fcache': {'write_policy': 'write_back'}}}

    def test_qcow2_is_refused_and_disconnected(self):
        info = self._nfs('qcow2')
        with mock.patch.object(NOVA_DRIVER, '_connect_volume'), \
                mock.patch.object(NOVA_DRIVER, '_disconnect_volume') as disc, \
                mock.patch.object(self.drvr, '_local_agent') as agent:
            err = self.assertRaises(exception.VolumeFormatNotCached,
                                    self.drvr._connect_volume, self.context,
                                    info, self.instance)
        self.assertIn('qcow2 file (nfs)', str(err))
        self.assertIn('nfs_qcow2_volumes = False', str(err))
        agent.assert_not_called()
        disc.assert_called_once()
        self.assertNotIn('fcache_export', info['data'])

    def test_raw_file_is_cached(self):
        info = self._nfs('raw')
        with mock.patch.object(NOVA_DRIVER, '_connect_volume'), \
                mock.patch.object(self.drvr, '_local_agent') as agent:
            agent.return_value.attach_volume.return_value = {
                'export_uri': 'nbd+unix:///v?socket=/e.sock'}
            self.drvr._connect_volume(self.context, info, self.instance)
        agent.return_value.attach_volume.assert_called_once()
        self.assertEqual('nbd+unix:///v?socket=/e.sock',
                         info['data']['fcache_export'])
