# SPDX-License-Identifier: Apache-2.0
"""A mixed fleet: live migrations to a host that cannot take the cache.

The harness of :mod:`tests.nova_functional.test_live_migration` (Nova 34
in process, two real agents, the shared volume as each host's own block
device over one file, qemu-io as the guest's I/O), with a destination
that cannot take a cache: ``dest`` runs Nova's plain LibvirtDriver
(``[DEFAULT] compute_driver = libvirt.LibvirtDriver``), or fcache's driver
with its agent stopped.  The source runs fcache's driver.  Stand-ins as
there: Nova's fake libvirt, os-brick's iSCSI connector's
``connect_volume`` answering with the calling host's disk (no iSCSI
initiator runs in this kernel), CinderFixture.  On the plain destination
the guest's I/O is qemu-io on that disk, the domain's ``<source dev>``.

* write_back: refused in Nova's pre-check (``check_can_live_migrate_*``),
  before anything moves; the server stays ACTIVE on the source with its
  cache and dirty blocks; the reason reaches the source's log and, when
  the destination is forced, the instance fault.  If the pre-check is
  bypassed, the source's ``live_migration`` rolls back instead.
* read_only and write_through: migrate uncached; the destination reads
  the shared volume, and the source's release after the migration writes
  nothing over what the guest wrote there since.
"""

import nova.monkey_patch  # noqa: F401  (Nova: first, before anything else)

from unittest import mock

import testscenarios

from nova import context as nova_context
from nova import objects

from nova_ext.virt import capability
from tests.nova_functional import test_live_migration as lm

# What the guest writes on the destination, over what it wrote before.
NEW_PATTERN = 0xa5


class _MixedFleet(lm._Base):
    dest_driver = 'libvirt.LibvirtDriver'
    # The API casts os-migrateLive to the conductor and answers 202, as in
    # production; made a call, the pre-check's error would come back
    # through the API as a 500.
    CAST_AS_CALL = False

    def start_compute(self, hostname='compute1', **kwargs):
        # One process, one CONF: what each host's nova.conf says.
        if hostname in ('src', 'dest'):
            self.flags(compute_driver=getattr(self, hostname + '_driver'))
        try:
            return super().start_compute(hostname=hostname, **kwargs)
        finally:
            self.flags(compute_driver='fcache.FcacheLibvirtDriver')

    def _post_live_migration(self, host='dest', **extra):
        self.api.post_server_action(
            self.server['id'],
            {'os-migrateLive': dict({'host': host,
                                     'block_migration': 'auto'}, **extra)})

    def _assert_stays_on_source(self, before):
        """Nothing moved: the source keeps the VM, its cache and data."""
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        self._wait_for_state_change(self.server, 'ACTIVE')
        server = self.api.get_server(self.server['id'])
        self.assertEqual('src', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self.migrations)
        after = self.agents['src'].show(lm.VOLUME)
        self.assertEqual('attached', after['state'])
        self.assertEqual(before['dirty_blocks'], after['dirty_blocks'])
        self.assertEqual(before['cached_blocks'], after['cached_blocks'])
        with open(self.origin.path, 'rb') as f:
            self.assertTrue(f.read() == self.original,
                            'the origin changed: something was written back')
        self._guest_io(self._connection_data()['fcache_export'],
                       'read -P %d 0 %d' % (lm.PATTERN, lm.DIRTY))
        self.assertEqual([], self._versioned('fcache.migration.start'))

    def _delete_and_check_origin(self):
        """Server delete: the source's detach writes the dirty blocks."""
        self._delete_server(self.server)
        self.assertEqual([], self._client('src').list_volumes()['volumes'])
        with open(self.origin.path, 'rb') as f:
            self.assertTrue(f.read() == self._expected_origin(),
                            'the origin differs from what the guest wrote')

    def _refusal_logged(self):
        return ('Live migration refused: write_back volume %s may hold '
                'dirty blocks only in this host\'s cache' % lm.VOLUME
                in self.stdlog.logger.output)


class WriteBackToPlainHostTest(_MixedFleet):
    specs = lm._specs('firepan')

    def test_refused_in_pre_check(self):
        self._boot_from_volume()
        before = self._warm_source_cache()
        self.assertGreater(before['dirty_blocks'], 0)
        self._post_live_migration()
        self._assert_stays_on_source(before)
        self.assertTrue(self._refusal_logged())
        self._delete_and_check_origin()

    def test_forced_destination_reports_the_reason(self):
        # Before microversion 2.68 an administrator could force the host
        # past the scheduler; the conductor still runs the pre-check
        # (LiveMigrationTask._check_requested_destination), and its error
        # becomes the instance fault.
        self._boot_from_volume()
        before = self._warm_source_cache()
        self.api.microversion = '2.67'
        self._post_live_migration(force=True)
        self._assert_stays_on_source(before)
        fault = objects.InstanceFault.get_latest_for_instance(
            nova_context.get_admin_context(), self.server['id'])
        self.assertIn('check_can_live_migrate_source from src to host dest',
                      fault.message)
        self.assertIn('fcache: write_back volume %s may hold dirty blocks'
                      % lm.VOLUME, fault.message)
        self.assertIn('Live-migrate it to a host running fcache',
                      fault.details)
        # Where an administrator reads it: the live-migration action's
        # conductor event (its details since microversion 2.84).
        self.api.microversion = 'latest'
        action = self.api.api_get('/servers/%s/os-instance-actions' %
                                  self.server['id']).body[
            'instanceActions'][0]
        self.assertEqual('live-migration', action['action'])
        events = {e['event']: e for e in self.api.api_get(
            '/servers/%s/os-instance-actions/%s' % (
                self.server['id'], action['request_id'])).body[
            'instanceAction']['events']}
        event = events['conductor_live_migrate_instance']
        self.assertEqual('Error', event['result'])
        self.assertIn('fcache: write_back volume %s may hold dirty blocks'
                      % lm.VOLUME, event['details'])
        self._delete_and_check_origin()

    def test_bypassed_pre_check_is_rolled_back_by_the_source(self):
        # The second line of defence: had the check let it through, the
        # source's live_migration finds the volume unprepared by the
        # destination and rolls back before the VM moves.
        self._boot_from_volume()
        before = self._warm_source_cache()
        with mock.patch.object(capability, 'refusal', return_value=None):
            self._post_live_migration()
            self._assert_stays_on_source(before)
        fault = objects.InstanceFault.get_latest_for_instance(
            nova_context.get_admin_context(), self.server['id'])
        self.assertIn('fcache: the destination dest did not prepare the '
                      'cache of write_back volume(s) %s' % lm.VOLUME,
                      fault.message)
        self._delete_and_check_origin()


class WriteBackToHostWithAgentDownTest(_MixedFleet):
    dest_driver = 'fcache.FcacheLibvirtDriver'
    specs = lm._specs('firepan')

    def test_refused_in_pre_check(self):
        self._boot_from_volume()
        before = self._warm_source_cache()
        self.agents['dest'].stop()
        self._post_live_migration()
        self._assert_stays_on_source(before)
        self.assertTrue(self._refusal_logged())
        self.assertIn("This host's fcache agent does not answer",
                      self.stdlog.logger.output)
        self._delete_and_check_origin()


class NothingDirtyToPlainHostTest(testscenarios.WithScenarios, _MixedFleet):
    scenarios = [('read_only', {'write_policy': 'read_only'}),
                 ('write_through', {'write_policy': 'write_through'})]

    @property
    def specs(self):
        return lm._specs('firepan', write_policy=self.write_policy)

    def _migrate_stub(self, domain, destination, params, flags):
        super()._migrate_stub(domain, destination, params, flags)
        # The guest runs on the destination from here on, on the shared
        # volume itself, and writes over what the source still caches;
        # the source releases its cache only after this (Nova's
        # post_live_migration).
        self._guest_io(self._origin_on('dest'), 'write -P %d 0 %d' % (
            NEW_PATTERN, lm.DIRTY))

    def test_migrates_uncached(self):
        self._boot_from_volume()
        # Before: the guest writes and reads through the source's cache.
        self._guest_io(self._connection_data()['fcache_export'],
                       'write -P %d 0 %d' % (lm.PATTERN, lm.DIRTY),
                       'read 0 %d' % lm.WARM)
        before = self.agents['src'].show(lm.VOLUME)
        self.assertEqual(0, before['dirty_blocks'])
        self.assertGreater(before['cached_blocks'], 0)

        self._live_migrate(self.server, host='dest')

        server = self.api.get_server(self.server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(self.migrations))
        # The destination's disk is the shared volume, not an export of
        # the destination's agent, which nothing asked.
        self.assertEqual(1, len(self.dest_disk_xml))
        self.assertIn('<source dev="%s"/>' % self._origin_on('dest'),
                      self.dest_disk_xml[0])
        self.assertNotIn('fcache_export', self._connection_data())
        self.assertEqual([], self._client('dest').list_volumes()['volumes'])
        # The source released its cache and wrote nothing back: the
        # destination's writes stand, the rest is what the guest wrote
        # before or never touched.
        self.assertEqual([], self._client('src').list_volumes()['volumes'])
        self._guest_io(self._origin_on('dest'),
                       'read -P %d 0 %d' % (NEW_PATTERN, lm.DIRTY))
        with open(self.origin.path, 'rb') as f:
            data = f.read()
        self.assertTrue(data == bytes([NEW_PATTERN]) * lm.DIRTY +
                        self.original[lm.DIRTY:],
                        'the origin differs from what the guest wrote')
        self.assertIn('Volume %s (%s) migrates uncached'
                      % (lm.VOLUME, self.write_policy),
                      self.stdlog.logger.output)
        self.assertEqual([], self._versioned('fcache.migration.start'))
        self._delete_server(self.server)


class FromPlainHostTest(_MixedFleet):
    """The rollout: a server on a host without fcache moves onto one.

    Nothing is cached on the source, so nothing is dirty anywhere; the
    source's plain driver writes the destination's disk as os-brick's
    device.  The destination connects the volume uncached (its agent
    would hold the device QEMU must open) and caches it from its next
    attach: a hard reboot here.
    """
    src_driver = 'libvirt.LibvirtDriver'
    dest_driver = 'fcache.FcacheLibvirtDriver'
    specs = lm._specs('firepan', write_policy='write_back')

    def test_migrates_then_cached_from_the_next_attach(self):
        self._boot_from_volume()
        self.assertNotIn('fcache_export', self._connection_data())
        self._guest_io(self._origin_on('src'), 'write -P %d 0 %d' % (
            lm.PATTERN, lm.DIRTY))

        self._live_migrate(self.server, host='dest')

        server = self.api.get_server(self.server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(self.dest_disk_xml))
        self.assertIn('<source dev="%s"/>' % self._origin_on('dest'),
                      self.dest_disk_xml[0])
        self.assertNotIn('fcache_export', self._connection_data())
        self.assertEqual([], self._client('dest').list_volumes()['volumes'])
        self.assertIn('arrives from src, which does not run fcache',
                      self.stdlog.logger.output)
        self._guest_io(self._origin_on('dest'),
                       'read -P %d 0 %d' % (lm.PATTERN, lm.DIRTY))

        self._reboot_server(self.server, hard=True)
        data = self._connection_data()
        shown = self.agents['dest'].show(lm.VOLUME)
        self.assertEqual(shown['export_uri'], data['fcache_export'])
        self.assertEqual('write_back', shown['write_policy'])
        self._guest_io(data['fcache_export'],
                       'read -P %d 0 %d' % (lm.PATTERN, lm.DIRTY))
        self._delete_server(self.server)
        with open(self.origin.path, 'rb') as f:
            self.assertTrue(f.read() == self._expected_origin(),
                            'the origin differs from what the guest wrote')
