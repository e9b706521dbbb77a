# SPDX-License-Identifier: Apache-2.0
"""A cached volume's life through Nova's API where fcache must say no.

Detaching it when the agent cannot:

A write_back cache may hold the only copy of what the guest wrote.  Its
detach writes every dirty block back to the origin and flushes it; when
the origin cannot be reached the agent keeps the volume.  The driver must
then fail Nova's detach (Nova rolls the volume back to in-use) rather than
let Cinder hand a volume to another host whose newest data stays here.
Once the origin is back, the same API call detaches it, and the origin
holds what the guest wrote.  A write_through volume in the same situation
has nothing to lose: its detach goes on.

Evacuating its server when the host that caches it write_back is down:
that cache may hold the only copy of what the guest wrote, so the
destination refuses to rebuild the server before anything moves, with
the way out in the fault; with ``[fcache] evacuate_write_back = discard``
the operator accepts the loss and the evacuation goes on, logged.  The
guest writes on its new host, which writes it back; then the failed host
returns: its agent restarts warm with the old dirty blocks, which it holds
(writes none back: doc/reference/ucache.rst), and its nova-compute destroys the
evacuated server, whose volume the driver detaches with ``discard_dirty``.
The storage keeps what the guest wrote on its new host, not the stale
block (the oracle is the volume's file itself).

Real agents, Nova in process with fakelibvirt (the guest's I/O is qemu-io
on the agent's export); os-brick's iSCSI connector's ``connect_volume`` is
replaced as in test_live_migration.py (no iSCSI initiator in this
kernel).  The evacuation's volume is each host's disk, a real block
device as os-brick would name it (:mod:`tests.nova_functional.luns`).
The detach tests need storage that goes away and comes back, which a
loop device cannot do: their volume is nbdkit serving the file, which
they stop and start, and their connector stand-in answers with its NBD
URI -- an origin the agent takes, but not what os-brick's iSCSI
connector returns (it stands for an iSCSI target that stops answering).
"""

import os
import time

from nova.tests.functional.api import client as api_client

from fcache_testkit import harness
from tests.nova_functional import test_live_migration as lm

MiB = lm.MiB
PATTERN = 0x3c
NEWER = 0xa7


class _DetachBase(lm._Base):

    def setUp(self):
        super().setUp()
        # fakelibvirt sends no device-removed event for a network disk it
        # does not render; the driver then finds the disk gone from the
        # domain.  Waiting 20 s for the event would only slow the test.
        self.flags(device_detach_timeout=1, group='libvirt')

    def _server_with_volume(self):
        body = self._build_server(networks='none', host='src')
        server = self.api.post_server({'server': body})
        self.server = self._wait_for_state_change(server, 'ACTIVE')
        self._attach_volume(self.server, lm.VOLUME)
        export = self._connection_data()['fcache_export']
        self._guest_io(export, 'write -P %d 0 %d' % (PATTERN, MiB))
        return self.agents['src'].show(lm.VOLUME)

    def _detach(self):
        # Both computes run in this process on one CONF: the driver detach
        # is made only where CONF.host is the instance's host.
        self.flags(host='src')
        self.api.delete_server_volume(self.server['id'], lm.VOLUME)

    def _still_attached(self):
        try:
            self.api.get_server_volume(self.server['id'], lm.VOLUME)
            return True
        except api_client.OpenStackApiNotFoundException:
            return False

    def _origin_head(self):
        with open(self.origin.path, 'rb') as f:
            return f.read(MiB)

    def _volume_events(self, event_type):
        """The payload data of each fcache.volume.* ``event_type``."""
        return [n['payload']['nova_object.data']
                for n in self._versioned(event_type)]


class WriteBackDetachTest(_DetachBase):
    specs = lm._specs('firepan', write_policy='write_back')
    # The storage server stops and comes back: nbdkit (see above).
    nbd_origin = True

    def test_detach_fails_while_dirty_data_cannot_be_written_back(self):
        shown = self._server_with_volume()
        self.assertGreater(shown['dirty_blocks'], 0)
        self.origin.stop()
        # The test runs Nova's casts as calls: the compute's failure comes
        # back through the API call here (a cloud answers 202 and records
        # the fault).
        self.assertRaises(api_client.OpenStackApiException, self._detach)
        # Nova kept the attachment; the agent kept every dirty block.
        self.assertTrue(self._still_attached())
        # The attach was notified, and the refused detach as an error.
        attach, = self._volume_events('fcache.volume.attach')
        self.assertEqual('write_back', attach['write_policy'])
        self.assertEqual('src', attach['host'])
        self.assertEqual(self.server['id'], attach['instance_uuid'])
        error, = self._volume_events('fcache.volume.error')
        self.assertEqual('detach', error['phase'])
        self.assertEqual([], self._volume_events('fcache.volume.detach'))
        shown = self.agents['src'].show(lm.VOLUME)
        self.assertGreater(shown['dirty_blocks'], 0)
        self.assertNotEqual(bytes([PATTERN]) * MiB, self._origin_head())

        self.origin.start()
        harness.wait_for(
            lambda: 're-established' in self.agents['src'].log(), 20,
            'the agent to reconnect to the origin')
        self._detach()
        self._wait_for_volume_detach(self.server['id'], lm.VOLUME)
        self.assertEqual(
            [], self._client('src').list_volumes()['volumes'])
        self.assertEqual(bytes([PATTERN]) * MiB, self._origin_head())
        detach, = self._volume_events('fcache.volume.detach')
        self.assertEqual((lm.VOLUME, False, 0, 'detach'), (
            detach['volume_id'], detach['discarded'],
            detach['dirty_blocks_dropped'], detach['reason']))


class WriteThroughDetachTest(_DetachBase):
    specs = lm._specs('firepan', write_policy='write_through')
    # The storage server stops: nbdkit (see above).
    nbd_origin = True

    def test_detach_goes_on_with_nothing_to_lose(self):
        self._server_with_volume()
        self.assertEqual(bytes([PATTERN]) * MiB, self._origin_head())
        self.origin.stop()
        self._detach()
        self._wait_for_volume_detach(self.server['id'], lm.VOLUME)
        self.assertTrue(os.path.exists(self.origin.path))


class WriteBackEvacuateTest(_DetachBase):
    specs = lm._specs('firepan', write_policy='write_back')

    def _start_storage_and_agents(self):
        super()._start_storage_and_agents()
        # The evacuated guest's writes reach the storage from its new host
        # within a write-back period, as on a host that runs for a while.
        self._writeback_every(self.agents['dest'], 100)

    def _writeback_every(self, agent, ms):
        agent.stop()
        agent.settings['writeback_interval_ms'] = ms
        agent.write_config()
        agent.start()

    def test_evacuation_refused_unless_the_loss_is_accepted(self):
        self._boot_from_volume()
        self._guest_io(self._connection_data()['fcache_export'],
                       'write -P %d 0 %d' % (PATTERN, MiB))
        self.assertGreater(
            self.agents['src'].show(lm.VOLUME)['dirty_blocks'], 0)
        # The source host fails.
        self.computes['src'].stop()
        service = self.api.get_services(host='src',
                                        binary='nova-compute')[0]
        self.api.put_service(service['id'], {'forced_down': True})

        # Casts run as calls here: the destination's refusal comes back
        # through the API call (a cloud answers 200 and records the fault).
        self.assertRaises(api_client.OpenStackApiException,
                          self.api.post_server_action, self.server['id'],
                          {'evacuate': {}})
        self._wait_for_migration_status(self.server, ['failed', 'error'])
        server = self._wait_for_state_change(self.server, 'ERROR')
        self.assertIn('not evacuating', server['fault']['message'])
        self.assertIn('evacuate_write_back = discard',
                      server['fault']['message'])
        # Nothing moved: the destination's agent has no volume.
        self.assertEqual([], self._client('dest').list_volumes()['volumes'])

        self.flags(evacuate_write_back='discard', group='fcache')
        self._evacuate_server(self.server, expected_host='dest',
                              expected_state='ACTIVE')
        self.assertEqual([lm.VOLUME], [
            v['volume_id']
            for v in self._client('dest').list_volumes()['volumes']])

    def test_returning_host_drops_the_stale_blocks(self):
        self._boot_from_volume()
        self._guest_io(self._connection_data()['fcache_export'],
                       'write -P %d 0 %d' % (PATTERN, MiB))
        dirty = self.agents['src'].show(lm.VOLUME)['dirty_blocks']
        self.assertGreater(dirty, 0)
        # The host fails: its nova-compute and its agent die with it.
        self.computes['src'].stop()
        self.agents['src'].kill()
        service = self.api.get_services(host='src',
                                        binary='nova-compute')[0]
        self.api.put_service(service['id'], {'forced_down': True})
        self.flags(evacuate_write_back='discard', group='fcache')
        # Whatever state Nova brings the server back in (fakelibvirt may
        # have reported it stopped): its volume is attached on dest.
        self.api.post_server_action(self.server['id'], {'evacuate': {}})
        self._wait_for_migration_status(self.server, ['done'])
        self._wait_for_server_parameter(self.server, {
            'OS-EXT-SRV-ATTR:host': 'dest', 'OS-EXT-STS:task_state': None})

        # The guest, on its new host, writes the same range; its agent
        # writes it back.
        export = self._connection_data()['fcache_export']
        self.assertIn(self.agents['dest'].export_dir, export)
        self._guest_io(export, 'write -P %d 0 %d' % (NEWER, MiB))
        harness.wait_for(
            lambda: self.agents['dest'].show(lm.VOLUME)['dirty_blocks'] == 0,
            30, "the destination's write-back")
        newer = bytes([NEWER]) * MiB
        self.assertEqual(newer, self._origin_head())

        # The failed host returns: its agent first (systemd), warm, with
        # the old dirty blocks, writing back every 100 ms.  It holds them.
        src = self.agents['src']
        src.settings['writeback_interval_ms'] = 100
        src.write_config()
        src.start()
        shown = src.show(lm.VOLUME)
        self.assertEqual(dirty, shown['dirty_blocks'])
        self.assertEqual('held', shown['writeback'])
        time.sleep(1)
        self.assertEqual(newer, self._origin_head())

        # Then its nova-compute, which destroys the evacuated server (the
        # hypervisor still has it).  Its nova.conf: src's.
        self.flags(host='src')
        self.flags(agent_socket=src.control_socket, group='fcache',
                   **self._fcache_flags('src'))
        self.restart_compute_service('src', keep_hypervisor_state=True)
        # The storage holds what the guest wrote on its new host.
        self.assertEqual(newer, self._origin_head())
        self.assertEqual([], self._client('src').list_volumes()['volumes'])
        self.assertIn('detached with discard_dirty: %d unwritten blocks '
                      'dropped' % dirty, src.run_log())
        self.assertIn('fcache dropped %d dirty blocks of write_back volume '
                      '%s without writing them back' % (dirty, lm.VOLUME),
                      self.stdlog.logger.output)
        # Notified as a detach that dropped them, from the returning host.
        dropped = [d for d in self._volume_events('fcache.volume.detach')
                   if d['host'] == 'src']
        self.assertEqual([(True, dirty, 'evacuated')], [
            (d['discarded'], d['dirty_blocks_dropped'], d['reason'])
            for d in dropped])
        time.sleep(0.5)
        self.assertEqual(newer, self._origin_head())
        # The server lives on, on its new host, with its volume.
        self.assertEqual([lm.VOLUME], [
            v['volume_id']
            for v in self._client('dest').list_volumes()['volumes']])
