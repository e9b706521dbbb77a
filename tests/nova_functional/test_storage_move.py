# SPDX-License-Identifier: Apache-2.0
"""Cinder moving an in-use cached volume, through Nova, in process.

Nova 34's functional fixtures (as in test_live_migration) with our driver
on the compute ``src`` and its real fcache agent.  A server boots from a
cached volume, a second cached volume (CinderFixture's ``SWAP_OLD_VOL``,
whose ``migration_status`` is ``migrating``, as Cinder sets it while it
migrates or retypes a volume) is attached through the API, the guest
writes to it through the agent's export, and Cinder's call to Nova is
made the way Cinder makes it: ``PUT
/servers/{id}/os-volume_attachments/{old}`` with the new volume
(``SWAP_NEW_VOL``).  Nova's compute manager calls our driver's
``swap_volume``; the agent copies the old volume onto the new one with
the type's scheme and keeps serving the same export.

Real: Nova's API, conductor and compute manager swap path, our driver,
the fcache agent (ASan build), the storage move in the agent, the old
and the new volume as the host's disks (block device nodes
``/dev/sdfc<N>`` over loop devices over each volume's file:
:mod:`tests.nova_functional.luns`), qemu-io doing the guest's I/O through
the agent's export.

Stand-ins, because they cannot run here: libvirt/QEMU is Nova's fake
libvirt (our swap does not touch the domain, which is what is checked:
no block copy, no new disk XML); os-brick's iSCSI connector's
``connect_volume`` (no iSCSI initiator in this kernel) answers with each
volume's disk, chosen by ``target_lun``; Cinder is ``CinderFixture``,
whose connection_info is built with the real ``cinder_ext.policy`` bridge
from each type's specs (the old type on an HDD, the new on an SSD).
"""

import nova.monkey_patch  # noqa: F401  (Nova: first, before anything else)

import os
from unittest import mock

import fixtures
from oslo_serialization import jsonutils

from nova import context as nova_context
from nova import objects
from nova.tests.functional.api import client as api_client

from cinder_ext import policy as cinder_policy
from fcache_testkit import harness
from tests.nova_functional import luns
from tests.nova_functional import test_live_migration as base_lm

SIZE = 16 << 20
MiB = 1 << 20
PATTERN = 0xa5


def _type(medium, scheme=None, wear_weight=None):
    specs = {'cacheable': '<is> True', 'fcache:cache_size': '8M',
             'fcache:write_policy': 'write_through',
             'fcache:medium': medium}
    if scheme:
        specs['fcache:storage_migration'] = scheme
    if wear_weight is not None:
        specs['fcache:wear_weight'] = str(wear_weight)
    return specs


class _SwapBase(base_lm._Base):

    new_specs = _type('ssd', 'auto', 0.8)

    def setUp(self):
        super().setUp()
        self.old_vol = self.cinder.SWAP_OLD_VOL
        self.new_vol = self.cinder.SWAP_NEW_VOL
        self.origins = {}
        for lun, name, seed in (('2', 'old', 7), ('3', 'new', 9)):
            path = os.path.join(self.workdir, '%s.img' % name)
            harness.make_origin_file(path, SIZE, seed=seed)
            self.origins[lun] = self.useFixture(luns.SharedLun(path,
                                                               ('src',)))
        with open(self.origins['2'].path, 'rb') as f:
            self.old_content = f.read()
        infos = dict(self.cinder.VOLUME_CONNECTION_INFO)
        for vol, lun, specs in ((self.old_vol, '2', _type('hdd', 'lr')),
                                (self.new_vol, '3', self.new_specs)):
            data = {'target_lun': lun, 'cacheable': True}
            cinder_policy.add_to_connection_data(data, specs)
            infos[vol] = {'driver_volume_type': 'iscsi', 'data': data}
        self.cinder.VOLUME_CONNECTION_INFO = infos

        def disk(host, connection_properties):
            lun = connection_properties.get('target_lun')
            return self.origins.get(lun, self.origin).devices[host]
        luns.iscsi_connector(self, disk)
        # Nothing in this test may go through libvirt's block copy.
        self.block_copy = mock.Mock(side_effect=AssertionError(
            'libvirt block copy used for a cached volume'))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver._swap_volume',
            self.block_copy))

    def _bdm(self, volume_id):
        return objects.BlockDeviceMapping.get_by_volume_and_instance(
            nova_context.get_admin_context(), volume_id, self.server['id'])

    def _move_events(self, event_type):
        """The payload data of each fcache.storage_move.* ``event_type``."""
        return [n['payload']['nova_object.data']
                for n in self._versioned(event_type)]

    def _attach_old(self):
        self._boot_from_volume()
        self._attach_volume(self.server, self.old_vol)
        info = jsonutils.loads(self._bdm(self.old_vol).connection_info)
        export = info['data']['fcache_export']
        vol = self.agents['src'].show(self.old_vol)
        self.assertEqual(self.origins['2'].devices['src'], vol['origin'])
        # The guest writes its first MiB through the export.
        self._guest_io(export, 'write -P %d 0 %d' % (PATTERN, MiB))
        return export


class FcacheSwapVolumeTest(_SwapBase):
    """swap_volume of a cached volume: the agent moves it."""

    def test_swap_moves_through_the_agent(self):
        export = self._attach_old()
        self.api.put_server_volume(self.server['id'], self.old_vol,
                                   self.new_vol)
        self.block_copy.assert_not_called()
        # CinderFixture's completion keeps the new volume id on the BDM.
        info = jsonutils.loads(self._bdm(self.new_vol).connection_info)
        data = info['data']
        # The guest disk did not change; the agent now reads the new
        # volume, and knows it by the id it attached it with.
        self.assertEqual(export, data['fcache_export'])
        self.assertEqual(self.old_vol, data['fcache_volume'])
        move = data['fcache_storage_move']
        # auto from an HDD to an SSD: LR whatever the weight (§7.3.1).
        self.assertEqual('lr', move['scheme'])
        self.assertTrue(move['auto'])
        self.assertEqual(self.origins['3'].devices['src'], move['to'])
        vol = self.agents['src'].show(self.old_vol)
        self.assertEqual(self.origins['3'].devices['src'], vol['origin'])
        self.assertEqual('done', vol['move']['state'])
        # Notified: its start, then its end with the agent's figures.
        start, = self._move_events('fcache.storage_move.start')
        self.assertEqual((self.old_vol, self.new_vol, 'lr', 'src'), (
            start['volume_id'], start['new_volume_id'], start['scheme'],
            start['host']))
        end, = self._move_events('fcache.storage_move.end')
        self.assertEqual(('done', 'lr'), (end['state'], end['scheme']))
        self.assertEqual(vol['move']['bytes_copied'], end['bytes_copied'])
        self.assertGreater(end['bytes_copied'], 0)
        self.assertEqual([], self._move_events('fcache.storage_move.error'))
        # The guest still reads what it wrote, now from the new volume.
        self._guest_io(export, 'read -P %d 0 %d' % (PATTERN, MiB),
                       'write -P %d %d %d' % (PATTERN, MiB, MiB))
        # Detaching goes to the agent's id and flushes to the new volume.
        # (Nova detaches in the driver only when CONF.host is the
        # instance's host; the two in-process computes share one CONF,
        # which the last one started set to "dest".)
        self.flags(host='src')
        self.api.delete_server_volume(self.server['id'], self.new_vol)
        self._wait_for_volume_detach(self.server['id'], self.new_vol)
        ids = [v['volume_id'] if isinstance(v, dict) else v
               for v in self._client('src').list_volumes()['volumes']]
        self.assertNotIn(self.old_vol, ids)
        with open(self.origins['3'].path, 'rb') as f:
            new = f.read()
        expected = bytes([PATTERN]) * (2 * MiB) + self.old_content[2 * MiB:]
        self.assertTrue(new == expected,
                        'the new volume differs from the old one plus '
                        'what the guest wrote')

    def test_failed_move_rolls_back_to_the_old_volume(self):
        export = self._attach_old()
        # The new volume's device cannot be opened by the agent: something
        # else holds it (opened exclusively, as a mount would).
        self.origins['3'].hold('src')
        self.assertRaises(api_client.OpenStackApiException,
                          self.api.put_server_volume, self.server['id'],
                          self.old_vol, self.new_vol)
        self.block_copy.assert_not_called()
        info = jsonutils.loads(self._bdm(self.old_vol).connection_info)
        self.assertEqual(export, info['data']['fcache_export'])
        self.assertNotIn('fcache_storage_move', info['data'])
        vol = self.agents['src'].show(self.old_vol)
        self.assertEqual(self.origins['2'].devices['src'], vol['origin'])
        self._guest_io(export, 'read -P %d 0 %d' % (PATTERN, MiB))
        error, = self._move_events('fcache.storage_move.error')
        self.assertEqual((self.old_vol, self.new_vol), (
            error['volume_id'], error['new_volume_id']))
        self.assertTrue(error['error'])
        self.assertEqual([], self._move_events('fcache.storage_move.end'))


class FcacheSwapTimeoutTest(_SwapBase):
    """A move slower than [fcache] storage_move_timeout is aborted."""

    def _fcache_flags(self, host):
        flags = super()._fcache_flags(host)
        # 16 MiB at 1 MB/s take 16 s; the swap gives up after 2.
        flags.update(storage_move_timeout=2, storage_move_rate_limit=1,
                     storage_move_poll_interval=0.1)
        return flags

    def test_timeout_aborts_and_rolls_back(self):
        export = self._attach_old()
        self.assertRaises(api_client.OpenStackApiException,
                          self.api.put_server_volume, self.server['id'],
                          self.old_vol, self.new_vol)
        vol = self.agents['src'].show(self.old_vol)
        self.assertEqual(self.origins['2'].devices['src'], vol['origin'])
        self.assertEqual('aborted', vol['move']['state'])
        info = jsonutils.loads(self._bdm(self.old_vol).connection_info)
        self.assertEqual(export, info['data']['fcache_export'])
        self._guest_io(export, 'read -P %d 0 %d' % (PATTERN, MiB))
