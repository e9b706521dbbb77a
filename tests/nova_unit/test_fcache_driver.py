# SPDX-License-Identifier: Apache-2.0
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

import base64
import errno
import os
import stat
from unittest import mock

import fixtures
from lxml import etree
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids

from nova.compute import power_state
from nova.compute import utils as compute_utils
from nova import context
from nova import exception as nova_exception
from nova import objects
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.unit import fake_instance
from nova.virt import fake
from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt import guest as libvirt_guest
from nova.virt.libvirt import migration as libvirt_migrate

from nova_ext import exception
from nova_ext.virt import channel
from nova_ext.virt import disk
from nova_ext.virt import driver as fcache_driver
from nova_ext.virt import extend
from nova_ext.virt import reconnect

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

    def _fcache_dest_check_data(self):
        """A destination's check data that takes caches."""
        data = self._dest_check_data()
        channel.offer_destination(data, {'host': 'dest', 'engine': 'ucache',
                                         'capacity_bytes': 64 * MiB})
        return data

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

    def test_write_back_after_a_storage_move_is_refused(self):
        # After a swap the agent knows the volume by its old id, recorded
        # in the BDM; asked by the new one it would say "not attached",
        # and the volume would leave uncached with its dirty blocks here.
        def show(volume_id):
            if volume_id != uuids.old_volume:
                raise exception.AgentError(error='not attached',
                                           errno=errno.ENOENT)
            return _shown('write_back')
        bdm = _cached_bdm('write_back')
        bdm['connection_info']['data']['fcache_volume'] = uuids.old_volume
        self.agent.show_volume.side_effect = show
        with mock.patch.object(NOVA_DRIVER, 'check_can_live_migrate_source',
                               return_value=self._dest_check_data()):
            exc = self.assertRaises(
                nova_exception.MigrationPreCheckError,
                self.drvr.check_can_live_migrate_source, self.context,
                self.instance, self._dest_check_data(),
                block_device_info={'block_device_mapping': [bdm]})
        self.assertIn('fcache: write_back volume %s may hold dirty blocks'
                      % VOLUME, str(exc))

    def test_write_through_to_a_host_without_fcache_migrates(self):
        result = self._check_source(self._dest_check_data(),
                                    'write_through')
        self.assertEqual({VOLUME}, set(channel.read_sources(result)))

    def test_write_back_to_an_fcache_host_migrates(self):
        data = self._fcache_dest_check_data()
        result = self._check_source(data, 'write_back')
        # The destination's description does not travel on.
        source = channel.read_sources(result)[VOLUME]
        self.assertEqual(('write_back', 'firepan'),
                         (source['write_policy'], source['strategy']))
        self.assertEqual([VOLUME], [b.serial for b in result.bdms])

    def test_source_pins_a_key_of_its_agent_for_the_destination(self):
        # migration_tls = pinned: the destination must pin the source's
        # fingerprint before it accepts a stream, so it travels in the
        # check, with the migration id the key was made for.
        fp = '5a' * 32
        self.agent.call.return_value = {'fingerprint': fp}
        data = self._fcache_dest_check_data()
        result = self._check_source(data, 'write_back')
        source = channel.read_sources(result)[VOLUME]
        self.agent.call.assert_called_once_with(
            'migration-key', migration_id=source['migration_id'],
            volume_id=VOLUME)
        self.assertEqual(fp, source['fingerprint'])
        self.assertNotIn('private', jsonutils.dumps(source).lower())

    def test_source_whose_agent_makes_no_key_refuses_the_migration(self):
        self.agent.call.side_effect = exception.AgentError(
            'cannot make the migration\'s key pair', errno=errno.EIO)
        data = self._fcache_dest_check_data()
        exc = self.assertRaises(
            nova_exception.MigrationPreCheckError, self._check_source,
            data, 'write_back')
        self.assertIn('fcache cannot make the migration key of volume %s'
                      % VOLUME, str(exc))

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

    def test_write_back_after_a_storage_move_rolls_back(self):
        # The destination names the volume by its Cinder id; this host's
        # agent knows it by the id it was attached with before a swap,
        # which the instance's BDM records.
        def show(volume_id):
            if volume_id != uuids.old_volume:
                raise exception.AgentError(error='not attached',
                                           errno=errno.ENOENT)
            return _shown('write_back')
        self.agent.show_volume.side_effect = show
        bdm = objects.BlockDeviceMapping(
            volume_id=VOLUME, source_type='volume',
            destination_type='volume',
            connection_info=jsonutils.dumps({'serial': VOLUME, 'data': {
                'volume_id': VOLUME, 'fcache_volume': uuids.old_volume}}))
        with mock.patch.object(
                objects.BlockDeviceMappingList, 'get_by_instance_uuid',
                return_value=objects.BlockDeviceMappingList(objects=[bdm])):
            live, recover, fault = self._migrate('write_back')
        live.assert_not_called()
        recover.assert_called_once()
        self.assertIn('did not prepare the cache of write_back volume(s) %s'
                      % VOLUME, str(fault.call_args[0][2]))

    def test_prepared_volumes_are_not_left_behind(self):
        self.assertEqual([], self.drvr._fcache_left_behind(
            self.context, self.instance, objects.LibvirtLiveMigrateData(bdms=[
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

    def test_export_name_is_not_logged(self):
        """The export's name opens it: the guest's XML has it, logs not."""
        name = '5f3c' * 8
        info = self._nfs('raw')
        with mock.patch.object(NOVA_DRIVER, '_connect_volume'), \
                mock.patch.object(self.drvr, '_local_agent') as agent:
            agent.return_value.attach_volume.return_value = {
                'export_uri': 'nbd+unix:///%s?socket=/e.sock' % name}
            self.drvr._connect_volume(self.context, info, self.instance)
        self.assertIn('guest disk at /e.sock', self.stdlog.logger.output)
        self.assertNotIn(name, self.stdlog.logger.output)


NEW_SIZE = 3 * 1024 ** 3
EXPORT_SOCKET = '/run/fcache/exports/%s.sock' % VOLUME
GUEST_XML = """<domain><devices>
  <disk type='network' device='disk'><driver name='qemu' type='raw'/>
    <source protocol='nbd' name='%s' index='2'>
      <host transport='unix' socket='%s'/></source>
    <target dev='vdb' bus='virtio'/><serial>%s</serial></disk>
</devices></domain>""" % (VOLUME, EXPORT_SOCKET, VOLUME)


class OnlineExtendTest(_DriverTest):
    """Nova's extend_volume, whole, on a cached iSCSI volume.

    os-brick's extend and QEMU's monitor are mocked: fakelibvirt has no
    QEMU (tests/real_libvirt/test_extend.py runs the QEMU part for real,
    tests/functional/test_extend.py the agent's).
    """

    def setUp(self):
        super().setUp()
        self.info = {'driver_volume_type': 'iscsi', 'serial': VOLUME,
                     'data': {'volume_id': VOLUME, 'cacheable': True,
                              'device_path': '/dev/sdfc1',
                              'fcache': {'write_policy': 'write_back'},
                              'fcache_export': 'nbd+unix:///%s?socket=%s' % (
                                  VOLUME, EXPORT_SOCKET)}}
        self.agent = self.useFixture(fixtures.MockPatchObject(
            self.drvr, '_local_agent')).mock.return_value
        self.agent.extend_volume.return_value = {'volume_id': VOLUME,
                                                 'size': NEW_SIZE}
        self.brick = self.useFixture(fixtures.MockPatchObject(
            NOVA_DRIVER, '_extend_volume', return_value=NEW_SIZE)).mock
        self.guest = mock.Mock()
        self.guest.get_power_state.return_value = power_state.RUNNING
        self.guest.get_xml_desc.return_value = GUEST_XML
        self.guest.get_block_device.side_effect = \
            lambda path: libvirt_guest.BlockDevice(self.guest, path)
        self.useFixture(fixtures.MockPatchObject(
            self.drvr._host, 'get_guest', return_value=self.guest))
        self.grow = self.useFixture(fixtures.MockPatchObject(
            extend, 'grow_guest_disk')).mock

    def _extend(self):
        self.drvr.extend_volume(self.context, self.info, self.instance,
                                NEW_SIZE)

    def test_encrypted_volume_is_refused(self):
        self.info['data']['encrypted'] = True
        err = self.assertRaises(nova_exception.VolumeExtendFailed,
                                self._extend)
        self.assertIn('does not grow an encrypted volume', str(err))
        self.agent.extend_volume.assert_not_called()

    def test_stopped_guest_grows_at_its_start(self):
        self.guest.get_power_state.return_value = power_state.SHUTDOWN
        self._extend()
        self.agent.extend_volume.assert_called_once_with(VOLUME)
        self.grow.assert_not_called()

    def test_guest_without_the_export_fails_the_extend(self):
        self.guest.get_xml_desc.return_value = '<domain><devices/></domain>'
        err = self.assertRaises(nova_exception.VolumeExtendFailed,
                                self._extend)
        self.assertIn('the guest has no NBD disk on the fcache export',
                      str(err))

    def test_the_export_grows_not_brick_device(self):
        self._extend()
        self.brick.assert_called_once_with(self.info, self.instance,
                                           NEW_SIZE)
        self.agent.extend_volume.assert_called_once_with(VOLUME)
        self.grow.assert_called_once()
        domain, disk, size, delay = self.grow.call_args[0]
        self.assertIs(self.guest._domain, domain)
        self.assertEqual(('vdb', EXPORT_SOCKET, NEW_SIZE),
                         (disk['target'], disk['socket'], size))
        self.assertEqual(self.drvr._fcache_conf.nbd_reconnect_delay, delay)
        # Nothing asked libvirt to resize os-brick's device.
        self.guest._domain.blockResize.assert_not_called()

    def test_agent_refusal_fails_the_extend(self):
        self.agent.extend_volume.side_effect = exception.AgentError(
            'volume v is migrating', errno=errno.EBUSY)
        err = self.assertRaises(nova_exception.VolumeExtendFailed,
                                self._extend)
        self.assertIn('cannot serve the new size', str(err))
        self.assertIn('is migrating', str(err))
        self.grow.assert_not_called()

    def test_agent_behind_the_storage_fails_the_extend(self):
        self.agent.extend_volume.return_value = {'size': NEW_SIZE // 3}
        err = self.assertRaises(nova_exception.VolumeExtendFailed,
                                self._extend)
        self.assertIn('does not see the new size', str(err))
        self.grow.assert_not_called()

    def test_qemu_refusal_fails_the_extend(self):
        self.grow.side_effect = reconnect.ReconnectError('blockdev-add: no')
        err = self.assertRaises(nova_exception.VolumeExtendFailed,
                                self._extend)
        self.assertIn('could not reopen the fcache disk', str(err))

    def test_uncached_volume_is_nova_s(self):
        del self.info['data']['fcache_export']
        self._extend()
        self.agent.extend_volume.assert_not_called()
        self.grow.assert_not_called()
        self.guest._domain.blockResize.assert_called_once_with(
            '/dev/sdfc1', NEW_SIZE,
            flags=fakelibvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)


RBD_SECRET = uuids.rbd_secret
# A ceph secret's value in libvirt: the cephx key's bytes.
CEPHX_KEY = b'\x9e\x11fcache-test-key\x00\x7f'
CEPHX_KEY_B64 = base64.b64encode(CEPHX_KEY).decode()


def _rbd_info(**data):
    """connection_info of Cinder's RBD driver (cinder/volume/drivers/rbd)."""
    base = {'name': 'volumes/volume-%s' % VOLUME,
            'hosts': ['192.0.2.1', 'fd00::2'], 'ports': ['6789', '3300'],
            'cluster_name': 'ceph', 'auth_enabled': True,
            'auth_username': 'cinder', 'secret_type': 'ceph',
            'secret_uuid': RBD_SECRET, 'volume_id': VOLUME,
            'discard': True, 'cacheable': True,
            'fcache': {'write_policy': 'write_through'}}
    base.update(data)
    return {'driver_volume_type': 'rbd', 'serial': VOLUME, 'data': base}


class RbdVolumeTest(_DriverTest):
    """A cacheable RBD network disk: the agent caches the image itself."""

    def setUp(self):
        super().setUp()
        self.keyring_dir = self.useFixture(fixtures.TempDir()).path + '/ceph'
        self.flags(rbd_keyring_dir=self.keyring_dir, group='fcache')
        self.keyring = '%s/%s.keyring' % (self.keyring_dir, VOLUME)
        # libvirt's virSecretLookupByUUIDString, which Nova's fake lacks:
        # over the fake connection's own secrets.
        self.conn = self.drvr._host.get_connection()

        def lookup(uuid):
            try:
                return self.conn._secrets[uuid]
            except KeyError:
                raise fakelibvirt.make_libvirtError(
                    fakelibvirt.libvirtError,
                    "Secret not found: no secret with matching uuid '%s'" %
                    uuid, error_code=fakelibvirt.VIR_ERR_NO_SECRET,
                    error_domain=fakelibvirt.VIR_FROM_SECRET)
        self.useFixture(fixtures.MockPatchObject(
            fakelibvirt.Connection, 'secretLookupByUUIDString',
            side_effect=lookup, create=True))
        self.agent = mock.Mock()
        self.agent.attach_volume.return_value = {
            'volume_id': VOLUME,
            'export_uri': 'nbd+unix:///%s?socket=/run/fcache/e/v.sock' %
            VOLUME}
        self.useFixture(fixtures.MockPatchObject(
            self.drvr, '_local_agent', return_value=self.agent))

    def _define_secret(self, uuid=RBD_SECRET, value=CEPHX_KEY):
        secret = self.conn.secretDefineXML(
            "<secret ephemeral='no' private='no'><uuid>%s</uuid>"
            "<usage type='ceph'><name>client.cinder</name></usage>"
            "</secret>" % uuid)
        if value is not None:
            secret.setValue(value)

    def _connect(self, info):
        with mock.patch.object(NOVA_DRIVER, '_connect_volume'), \
                mock.patch.object(NOVA_DRIVER, '_disconnect_volume') as disc:
            self.drvr._connect_volume(self.context, info, self.instance)
        return disc

    def _origin(self):
        return self.agent.attach_volume.call_args[0][1]

    def test_cached_with_a_keyring_from_the_libvirt_secret(self):
        self._define_secret()
        info = _rbd_info()
        self._connect(info)
        self.assertEqual(
            'rbd:volumes/volume-%s:id=cinder:keyring=%s:mon_host='
            '192.0.2.1;[fd00\\:\\:2]\\:3300' % (VOLUME, self.keyring),
            self._origin())
        self.assertEqual(VOLUME, self.agent.attach_volume.call_args[0][0])
        with open(self.keyring) as f:
            self.assertEqual('[client.cinder]\n\tkey = %s\n' % CEPHX_KEY_B64,
                             f.read())
        self.assertEqual(0o600, stat.S_IMODE(os.stat(self.keyring).st_mode))
        self.assertEqual(self.agent.attach_volume.return_value['export_uri'],
                         info['data']['fcache_export'])
        # The key goes to the keyring file only.
        for where in (jsonutils.dumps(info), self.stdlog.logger.output,
                      repr(self.agent.mock_calls)):
            self.assertNotIn(CEPHX_KEY_B64, where)

    def test_nova_conf_secret_when_cinder_gives_none(self):
        self.flags(rbd_user='nova', rbd_secret_uuid=uuids.nova_secret,
                   group='libvirt')
        self._define_secret(uuids.nova_secret)
        self._connect(_rbd_info(secret_uuid=None))
        self.assertIn(':id=nova:keyring=', self._origin())
        with open(self.keyring) as f:
            self.assertEqual('[client.nova]\n\tkey = %s\n' % CEPHX_KEY_B64,
                             f.read())

    def test_no_auth_no_keyring(self):
        self._connect(_rbd_info(auth_enabled=False, auth_username=None,
                                secret_uuid=None))
        self.assertEqual('rbd:volumes/volume-%s:mon_host=192.0.2.1;'
                         '[fd00\\:\\:2]\\:3300' % VOLUME, self._origin())
        self.assertFalse(os.path.exists(self.keyring_dir))

    def test_missing_secret_fails_the_attach_clearly(self):
        info = _rbd_info()
        with mock.patch.object(NOVA_DRIVER, '_connect_volume'), \
                mock.patch.object(NOVA_DRIVER, '_disconnect_volume') as disc:
            err = self.assertRaises(exception.RbdKeyUnavailable,
                                    self.drvr._connect_volume, self.context,
                                    info, self.instance)
        self.assertIn(RBD_SECRET, str(err))
        self.assertIn('rbd_secret_uuid', str(err))
        self.assertIn('client.cinder', str(err))
        self.agent.attach_volume.assert_not_called()
        disc.assert_called_once()
        self.assertNotIn('fcache_export', info['data'])
        self.assertFalse(os.path.exists(self.keyring))

    def test_secret_without_value_fails_the_attach(self):
        self._define_secret(value=None)
        with mock.patch.object(NOVA_DRIVER, '_connect_volume'), \
                mock.patch.object(NOVA_DRIVER, '_disconnect_volume'):
            err = self.assertRaises(exception.RbdKeyUnavailable,
                                    self.drvr._connect_volume, self.context,
                                    _rbd_info(), self.instance)
        self.assertIn('has no value', str(err))
        self.agent.attach_volume.assert_not_called()

    def test_agent_refusal_removes_the_keyring(self):
        self._define_secret()
        self.agent.attach_volume.side_effect = exception.AgentError(
            'cannot open origin', errno=errno.EACCES)
        with mock.patch.object(NOVA_DRIVER, '_connect_volume'), \
                mock.patch.object(NOVA_DRIVER, '_disconnect_volume') as disc:
            self.assertRaises(exception.AgentError, self.drvr._connect_volume,
                              self.context, _rbd_info(), self.instance)
        disc.assert_called_once()
        self.assertTrue(os.path.isdir(self.keyring_dir))
        self.assertEqual([], os.listdir(self.keyring_dir))

    def test_detach_removes_the_keyring(self):
        self._define_secret()
        info = _rbd_info()
        self._connect(info)
        self.assertTrue(os.path.exists(self.keyring))
        with mock.patch.object(NOVA_DRIVER, '_disconnect_volume') as disc:
            self.drvr._disconnect_volume(self.context, info, self.instance)
        self.agent.detach_volume.assert_called_once_with(VOLUME)
        disc.assert_called_once()
        self.assertFalse(os.path.exists(self.keyring))

    def test_released_by_a_migration_removes_the_keyring(self):
        # The source after the switchover: the agent let the volume go.
        self._define_secret()
        info = _rbd_info()
        self._connect(info)
        self.agent.detach_volume.side_effect = exception.AgentError(
            'no such volume', errno=errno.ENOENT)
        with mock.patch.object(NOVA_DRIVER, '_disconnect_volume'):
            self.drvr._disconnect_volume(self.context, info, self.instance)
        self.assertFalse(os.path.exists(self.keyring))

    def test_write_back_kept_keeps_the_keyring(self):
        self._define_secret()
        info = _rbd_info(fcache={'write_policy': 'write_back'})
        self._connect(info)
        self.agent.detach_volume.side_effect = exception.AgentError(
            'dirty blocks', errno=errno.EIO)
        self.agent.show_volume.return_value = {'write_policy': 'write_back',
                                               'dirty_blocks': 3}
        with mock.patch.object(NOVA_DRIVER, '_disconnect_volume'):
            self.assertRaises(exception.DirtyDataKept,
                              self.drvr._disconnect_volume, self.context,
                              info, self.instance)
        # The agent still writes back through it.
        self.assertTrue(os.path.exists(self.keyring))

    def test_migration_destination_pins_the_source_key(self):
        self.drvr._fcache_state.begin_incoming(
            self.instance.uuid, 'src', {VOLUME: {
                'cached': True, 'strategy': 'hybrid', 'cache_size': MiB,
                'write_policy': 'write_through', 'admission': 'all',
                'migration_id': 'm-chosen-by-the-source',
                'fingerprint': '5a' * 32}})
        self.agent.call.return_value = {
            'export_uri': 'nbd+unix:///v?socket=/run/fcache/e/v.sock',
            'listen': '0.0.0.0:7440', 'fingerprint': 'd0' * 32}
        prepared = self.drvr._fcache_prepare_incoming(
            self.context, self.instance,
            self.drvr._fcache_state.incoming(self.instance.uuid), VOLUME,
            '/dev/sdb')
        op, args = self.agent.call.call_args
        self.assertEqual('migration-incoming', op[0])
        self.assertEqual('m-chosen-by-the-source', args['migration_id'])
        self.assertEqual('5a' * 32, args['peer_fingerprint'])
        # What goes back to the source, which pins it.
        self.assertEqual('d0' * 32, prepared['fingerprint'])
        self.assertEqual('m-chosen-by-the-source', prepared['migration_id'])

    def test_migration_destination_prepares_with_its_own_origin(self):
        self._define_secret()
        self.drvr._fcache_state.begin_incoming(
            self.instance.uuid, 'src', {VOLUME: {
                'cached': True, 'strategy': 'hybrid', 'cache_size': MiB,
                'write_policy': 'write_through', 'admission': 'all'}})
        self.agent.call.return_value = {
            'export_uri': 'nbd+unix:///v?socket=/run/fcache/e/v.sock',
            'listen': '0.0.0.0:7440'}
        info = _rbd_info()
        self._connect(info)
        self.agent.attach_volume.assert_not_called()
        incoming = self.agent.call.call_args
        self.assertEqual('migration-incoming', incoming[0][0])
        self.assertTrue(incoming[1]['origin'].startswith(
            'rbd:volumes/volume-%s:id=cinder:keyring=%s:' %
            (VOLUME, self.keyring)))
        self.assertTrue(os.path.exists(self.keyring))
        self.assertNotIn(CEPHX_KEY_B64, jsonutils.dumps(info))
        # Nova's rollback disconnects the volume: the abort, the keyring.
        with mock.patch.object(NOVA_DRIVER, '_disconnect_volume'):
            self.drvr._disconnect_volume(self.context, info, self.instance)
        self.assertEqual('migration-abort', self.agent.call.call_args[0][0])
        self.assertFalse(os.path.exists(self.keyring))

    def test_guest_disk_points_at_the_export_without_rbd_auth(self):
        info = _rbd_info(fcache_export='nbd+unix:///%s?socket=/run/fcache/'
                         'exports/v.sock' % VOLUME)
        disk_info = {'bus': 'virtio', 'dev': 'vdb', 'type': 'disk'}
        # Nova's own rbd disk config first, as without fcache.
        plain = etree.XML(NOVA_DRIVER._get_volume_config(
            self.drvr, info, disk_info).to_xml())
        self.assertEqual('rbd', plain.find('source').get('protocol'))
        self.assertIsNotNone(plain.find('auth'))

        conf = self.drvr._get_volume_config(info, disk_info)
        doc = etree.XML(conf.to_xml())
        self.assertEqual('network', doc.get('type'))
        source = doc.find('source')
        self.assertEqual('nbd', source.get('protocol'))
        self.assertEqual(VOLUME, source.get('name'))
        hosts = source.findall('host')
        self.assertEqual([{'transport': 'unix',
                           'socket': '/run/fcache/exports/v.sock'}],
                         [dict(h.attrib) for h in hosts])
        self.assertIsNone(doc.find('auth'))
        self.assertIsNone(doc.find('source/auth'))
        self.assertEqual('raw', doc.find('driver').get('type'))
        self.assertEqual(VOLUME, doc.findtext('serial'))
        xml = etree.tostring(doc, encoding='unicode')
        for gone in ('rbd', RBD_SECRET, 'cinder', '192.0.2.1'):
            self.assertNotIn(gone, xml)

    def _swap(self, old, new, refused=None):
        """swap_volume with os-brick and the move mocked.

        Returns the mocks of the move and of os-brick's disconnect, and the
        exception ``refused`` it raised when given.
        """
        exc = None
        with mock.patch.object(self.drvr, '_fcache_brick_connect'), \
                mock.patch.object(self.drvr,
                                  '_fcache_brick_disconnect') as disc, \
                mock.patch.object(self.drvr, '_fcache_move') as move:
            move.return_value = {'elapsed_s': 1}
            args = (self.context, old, new, self.instance, '/dev/vdb', None)
            if refused:
                exc = self.assertRaises(refused, self.drvr.swap_volume, *args)
            else:
                self.drvr.swap_volume(*args)
        return move, disc, exc

    def _swap_infos(self, **policy):
        """The old volume, cached and connected, and a new RBD volume.

        ``policy``: what the new volume's type sets (``fcache`` of its
        connection_info).
        """
        self._define_secret()
        old = _rbd_info(fcache_export='nbd+unix:///v?socket=/e.sock')
        self._connect(_rbd_info())   # the old volume's keyring
        new_id = uuids.new_volume
        new = _rbd_info(name='volumes/volume-%s' % new_id, volume_id=new_id,
                        fcache=dict(policy, write_policy='write_through'))
        new['serial'] = new_id
        return old, new

    def test_swap_to_an_rbd_volume_moves_to_its_image(self):
        old, new = self._swap_infos()
        new_id = uuids.new_volume
        new_keyring = '%s/%s.keyring' % (self.keyring_dir, new_id)
        # An agent too old to list its move schemes: auto weighs them all.
        self.agent.capabilities.return_value = {'engine': 'ucache'}
        move, _, _ = self._swap(old, new)
        self.assertEqual('rbd:volumes/volume-%s:id=cinder:keyring=%s:'
                         'mon_host=192.0.2.1;[fd00\\:\\:2]\\:3300' %
                         (new_id, new_keyring), move.call_args[0][1])
        self.assertTrue(os.path.exists(new_keyring))
        self.assertFalse(os.path.exists(self.keyring))

    def test_swap_with_a_scheme_the_agent_does_not_run_is_refused(self):
        # A dmcache agent runs mirror and lr only (its capabilities): a
        # type asking for dbt fails the swap before any move, naming the
        # host and what its agent runs; the new volume is let go.
        self.drvr._fcache_hostname = 'cmp3'
        self.agent.capabilities.return_value = {
            'engine': 'dmcache', 'move_schemes': ['mirror', 'lr']}
        old, new = self._swap_infos(storage_migration='dbt')
        move, disc, exc = self._swap(old, new, exception.InvalidArgument)
        self.assertIn('the fcache agent on cmp3 runs only mirror, lr: name '
                      'one of them or auto', str(exc))
        move.assert_not_called()
        self.assertEqual(new, disc.call_args[0][1])
        self.assertFalse(os.path.exists(
            '%s/%s.keyring' % (self.keyring_dir, uuids.new_volume)))
        # auto weighs the two it runs: from SSD to HDD at wear weight
        # 0.5, where it would take SLR among all of them.
        new['data']['fcache'].update(storage_migration='auto', medium='hdd')
        move, _, _ = self._swap(old, new)
        self.assertIn(move.call_args[0][2], ('mirror', 'lr'))

    def test_swap_auto_assumes_the_requests_in_flight_configured(self):
        # From SSD to HDD at wear weight 0.5: SLR for a VM with 4 requests
        # in flight (the default), AIO for one that waits for each.
        self.agent.capabilities.return_value = {
            'engine': 'ucache', 'move_schemes': ['dbt', 'mirror', 'lr',
                                                 'slr', 'aio', 'dbt_capped']}
        old, new = self._swap_infos(storage_migration='auto', medium='hdd')
        move, _, _ = self._swap(old, new)
        self.assertEqual('slr', move.call_args[0][2])
        self.flags(storage_move_in_flight=1, group='fcache')
        move, _, _ = self._swap(old, new)
        self.assertEqual('aio', move.call_args[0][2])


class EvacuatedDestroyTest(_DriverTest):
    """A returning host destroys a server evacuated away: stale blocks go.

    Nova's _destroy_evacuated_instances calls destroy for it; the cleanup
    detaches its volumes (LibvirtDriver's part is a stand-in here that does
    just that).  Its write_back volumes are detached with discard_dirty;
    anything else is detached as ever.
    """

    def setUp(self):
        super().setUp()
        self.drvr._fcache_hostname = 'src'
        self.agent = mock.Mock()
        self.useFixture(fixtures.MockPatchObject(
            self.drvr, '_local_agent', return_value=self.agent))
        self.evacuations = []
        self.lookup = self.useFixture(fixtures.MockPatchObject(
            objects.MigrationList, 'get_by_filters',
            side_effect=lambda ctx, filters: self.evacuations)).mock

    def _destroy(self, write_policy='write_back'):
        info = _cached_bdm(write_policy)['connection_info']
        self.agent.show_volume.return_value = _shown(write_policy)

        def cleanup(context, instance, *args, **kwargs):
            self.drvr._fcache_release(context, info, instance)
        with mock.patch.object(NOVA_DRIVER, 'destroy', side_effect=cleanup):
            self.drvr.destroy(self.context, self.instance, [], {})

    def _evacuated(self):
        self.instance.host = 'dest'
        self.evacuations = [objects.Migration(
            source_compute='src', dest_compute='dest',
            migration_type='evacuation', status='done')]

    def test_write_back_volume_is_discarded(self):
        self._evacuated()
        self.agent.detach_volume.return_value = {
            'volume_id': VOLUME, 'dirty_blocks_dropped': 4}
        with mock.patch.object(fcache_driver.LOG, 'error') as error:
            self._destroy()
        self.agent.detach_volume.assert_called_once_with(
            VOLUME, discard_dirty=True)
        self.lookup.assert_called_once_with(self.context, {
            'source_compute': 'src', 'instance_uuid': self.instance.uuid,
            'migration_type': 'evacuation',
            'status': ['accepted', 'pre-migrating', 'done']})
        msg = error.call_args[0][0] % error.call_args[0][1:]
        self.assertIn('dropped 4 dirty blocks of write_back volume %s' %
                      VOLUME, msg)
        self.assertIn('evacuated to dest', msg)
        # Only for that destroy: the next one detaches as ever.
        self.assertEqual(set(), self.drvr._fcache_evacuated)

    def test_write_through_volume_is_detached_as_ever(self):
        self._evacuated()
        self._destroy('write_through')
        self.agent.detach_volume.assert_called_once_with(VOLUME)

    def test_server_still_here_is_detached_as_ever(self):
        # A live migration's rollback on its destination, a plain delete:
        # the server's host is not another one, nobody is asked.
        self._destroy()
        self.agent.detach_volume.assert_called_once_with(VOLUME)
        self.lookup.assert_not_called()

    def test_other_host_without_an_evacuation_is_detached_as_ever(self):
        # A live migration's rollback on its destination: the server's
        # host is its source, and no evacuation left this host.
        self.instance.host = 'dest'
        self._destroy()
        self.agent.detach_volume.assert_called_once_with(VOLUME)
        self.lookup.assert_called_once()

    def test_refused_discard_does_not_fail_the_destroy(self):
        self._evacuated()
        self.agent.detach_volume.side_effect = exception.AgentError(
            '1 client(s) have its export open', errno=errno.EBUSY)
        with mock.patch.object(fcache_driver.LOG, 'error') as error:
            self._destroy()
        self.agent.detach_volume.assert_called_once_with(
            VOLUME, discard_dirty=True)
        msg = error.call_args[0][0] % error.call_args[0][1:]
        self.assertIn("fcache volume-detach --discard-dirty %s" % VOLUME,
                      msg)

    def test_gone_volume_is_nothing_to_do(self):
        self._evacuated()
        self.agent.detach_volume.side_effect = exception.AgentError(
            'not attached', errno=errno.ENOENT)
        self._destroy()
        self.agent.detach_volume.assert_called_once_with(
            VOLUME, discard_dirty=True)

    def test_lookup_failure_detaches_as_ever(self):
        self._evacuated()
        self.lookup.side_effect = RuntimeError('conductor timed out')
        self._destroy()
        self.agent.detach_volume.assert_called_once_with(VOLUME)
