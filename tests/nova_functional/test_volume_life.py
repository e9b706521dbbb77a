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
the operator accepts the loss and the evacuation goes on, logged.

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

from nova.tests.functional.api import client as api_client

from tests.functional import harness
from tests.nova_functional import test_live_migration as lm

MiB = lm.MiB
PATTERN = 0x3c


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
