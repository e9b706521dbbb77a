# SPDX-License-Identifier: Apache-2.0
"""Nova's server actions on a server with a cached volume: nothing is lost.

The rows of doc/admin/operations.rst's table "Every server and volume action,
per write policy" that move or change data, each through Nova's API: a
reboot (soft, then hard), a stop and start, a shelve (offloaded at once:
the server boots from its volume) and an unshelve onto the other host, a
cold migration confirmed, a resize reverted, and a rebuild on the same
host of a server with a data volume.

Before each action the guest writes a pattern through its disk, the
agent's export; with ``write_back`` it is dirty in the host's cache and
nowhere else (the agents write back at most hourly).  After it, the
volume is attached to the agent of the host the server runs on (the
agent's volume-show; the other agent has no volume), the server's BDM
names that agent's export, and the guest reads its pattern back through
it.  Where the action detached the volume from an agent (hard reboot,
start, shelve offload, cold migration and resize on the source, revert on
the destination, rebuild) that agent wrote every dirty block back first:
the origin -- the shared LUN's file, read directly -- holds the pattern,
and the volume is attached again cold (no dirty or cached block).  Where
the action keeps the volume attached (soft reboot, stop) the cache keeps
its dirty blocks and the origin does not have them yet.  With
``write_through`` the origin has every write from the start; the actions
do the same to the volume (detach, attach), which
``ResizeRevertWriteThroughTest`` checks for one of them.

Cinder's volume transfer is not here: Nova has no part in it, Cinder
transfers only ``available`` volumes (detached: written back) and reads
no data, and ``CinderFixture`` has no transfer API.  A volume-backed
rebuild (reimage), an online extend and Cinder's reimage itself are here
with stand-ins where CinderFixture falls short (each test says which).

Real: Nova's control path in process (API, conductor, scheduler,
placement, two nova-compute services ``src`` and ``dest`` with our
driver), the two fcache agents (the ASan build), the volume as each
host's block device over one file (:mod:`tests.nova_functional.luns`),
and the guest's I/O (qemu-io on the agent's NBD export).  Stand-ins, as in
test_live_migration.py: libvirt/QEMU is Nova's fake libvirt, os-brick's
iSCSI connector's ``connect_volume`` answers with the calling host's disk,
Cinder is ``CinderFixture`` (connection_info from the type's specs through
``cinder_ext.policy``).  The cold migration's and resize's
``migrate_disk_and_power_off`` is libvirt's own: the two computes share
one instances_path and one IP, which it takes for shared instance storage
(no ssh); it powers the guest off and disconnects each volume, i.e.
detaches it from the agent, as on a real host.  It renames the
instance's directory, which spawn's image creation (a mock in Nova's
fixtures) would have made: the test makes it.
"""

import nova.monkey_patch  # noqa: F401  (Nova: first, before anything else)

import os

import fixtures
from lxml import etree
from oslo_config import cfg

from nova.volume import cinder as nova_cinder

from nova_ext.virt import extend

from tests.nova_functional import test_live_migration as lm

CONF = cfg.CONF
MiB = lm.MiB
SPAN = MiB
# What the guest writes before the action, and (resize revert) on the
# destination before the revert.
BEFORE = 0x71
MOVED = 0x72


class _ActionBase(lm._Base):
    specs = lm._specs('firepan', write_policy='write_back')
    write_policy = 'write_back'

    def setUp(self):
        super().setUp()
        # fakelibvirt sends no device-removed event for a network disk it
        # does not render (the rebuild's detach of a data volume): the
        # driver then finds the disk gone from the domain.
        self.flags(device_detach_timeout=1, group='libvirt')

    def _acting_as(self, host):
        """Run the next compute steps with CONF.host = host.

        Both computes run in this process on one CONF; Nova compares
        CONF.host with the instance's host to know whether it runs on the
        instance's host (a driver detach in a rebuild, a resize's
        cleanup).
        """
        self.flags(host=host)

    def _host(self):
        return self.api.get_server(self.server['id'])[
            'OS-EXT-SRV-ATTR:host']

    def _export(self, host):
        """The guest's disk on host: its agent's export, named in the BDM."""
        shown = self.agents[host].show(lm.VOLUME)
        self.assertEqual(shown['export_uri'],
                         self._connection_data()['fcache_export'])
        return shown['export_uri']

    def _guest_writes(self, pattern):
        host = self._host()
        self._guest_io(self._export(host),
                       'write -P %d 0 %d' % (pattern, SPAN))
        shown = self.agents[host].show(lm.VOLUME)
        if self.write_policy == 'write_back':
            self.assertEqual(SPAN // shown['block_size'],
                             shown['dirty_blocks'])
            self.assertFalse(self._origin_holds(pattern))
        else:
            self.assertEqual(0, shown['dirty_blocks'])
            self.assertTrue(self._origin_holds(pattern))
        return shown

    def _attached_on(self, host):
        """The server runs on host, whose agent alone has the volume."""
        self.assertEqual(host, self._host())
        shown = self.agents[host].show(lm.VOLUME)
        self.assertEqual(self.write_policy, shown['write_policy'])
        self.assertEqual(self._origin_on(host), shown['origin'])
        other = 'dest' if host == 'src' else 'src'
        self.assertEqual([], self._client(other).list_volumes()['volumes'])
        return shown

    def _attached_cold_on(self, host):
        """Attached on host anew: nothing cached, nothing dirty."""
        shown = self._attached_on(host)
        self.assertEqual(0, shown['dirty_blocks'])
        self.assertEqual(0, shown['cached_blocks'])
        return shown

    def _guest_reads(self, pattern):
        self._guest_io(self._export(self._host()),
                       'read -P %d 0 %d' % (pattern, SPAN))

    def _origin_holds(self, pattern):
        """Whether the shared LUN's file holds pattern (and the rest)."""
        with open(self.origin.path, 'rb') as f:
            data = f.read()
        return (data[:SPAN] == bytes([pattern]) * SPAN and
                data[SPAN:] == self.original[SPAN:])

    def _no_agent_has_it(self):
        for host in ('src', 'dest'):
            self.assertEqual([], self._client(host).list_volumes()[
                'volumes'], host)

    def _cold_migrate(self, flavor_id=None):
        # The instance directory spawn's _create_image (a mock here) made
        # on a real host: migrate_disk_and_power_off renames it.
        os.makedirs(os.path.join(CONF.instances_path, self.server['id']),
                    exist_ok=True)
        if flavor_id:
            self.api.post_server_action(
                self.server['id'], {'resize': {'flavorRef': flavor_id}})
        else:
            self.api.post_server_action(self.server['id'],
                                        {'migrate': None})
        return self._wait_for_state_change(self.server, 'VERIFY_RESIZE')


class RebootTest(_ActionBase):

    def test_soft_reboot_keeps_the_cache_hard_reboot_writes_back(self):
        self._boot_from_volume()
        before = self._guest_writes(BEFORE)

        self._reboot_server(self.server, hard=False)
        # The guest rebooted; its disk stayed attached and cached.
        shown = self._attached_on('src')
        self.assertEqual(before['dirty_blocks'], shown['dirty_blocks'])
        self.assertEqual(before['cached_blocks'], shown['cached_blocks'])
        self.assertFalse(self._origin_holds(BEFORE))
        self._guest_reads(BEFORE)

        self._reboot_server(self.server, hard=True)
        # Disconnected (written back, detached) and connected again.
        self.assertTrue(self._origin_holds(BEFORE))
        self._attached_cold_on('src')
        self._guest_reads(BEFORE)


class StopStartTest(_ActionBase):

    def test_stop_keeps_the_cache_start_writes_back(self):
        self._boot_from_volume()
        before = self._guest_writes(BEFORE)

        self._stop_server(self.server)
        shown = self._attached_on('src')
        self.assertEqual(before['dirty_blocks'], shown['dirty_blocks'])
        self.assertFalse(self._origin_holds(BEFORE))

        # Nova's libvirt driver starts a server by a hard reboot.
        self._start_server(self.server)
        self.assertTrue(self._origin_holds(BEFORE))
        self._attached_cold_on('src')
        self._guest_reads(BEFORE)


class ShelveTest(_ActionBase):

    def test_offload_writes_back_unshelve_on_the_other_host(self):
        self._boot_from_volume()
        self._guest_writes(BEFORE)

        # Volume-backed: shelved and offloaded at once.
        self._shelve_server(self.server, 'SHELVED_OFFLOADED')
        self._no_agent_has_it()
        self.assertTrue(self._origin_holds(BEFORE))

        # Unshelve onto the other host (microversion 2.91, admin).
        self.api.post_server_action(self.server['id'],
                                    {'unshelve': {'host': 'dest'}})
        self._wait_for_state_change(self.server, 'ACTIVE')
        self._attached_cold_on('dest')
        self._guest_reads(BEFORE)


class ColdMigrateConfirmTest(_ActionBase):

    def test_cold_migration_writes_back_on_the_source(self):
        self._boot_from_volume()
        self._guest_writes(BEFORE)

        self._cold_migrate()
        self.assertTrue(self._origin_holds(BEFORE))
        self._attached_cold_on('dest')
        self._guest_reads(BEFORE)

        # The confirmation runs on the source, which holds nothing more.
        self._acting_as('src')
        self._confirm_resize(self.server)
        self._attached_on('dest')
        self._guest_reads(BEFORE)
        self.assertTrue(self._origin_holds(BEFORE))


class ResizeRevertTest(_ActionBase):

    def test_revert_moves_the_volume_back(self):
        self._boot_from_volume()
        self._guest_writes(BEFORE)
        flavor = self._create_flavor(memory_mb=1024, vcpu=1, disk=1,
                                     ephemeral=0)

        self._cold_migrate(flavor)
        self.assertTrue(self._origin_holds(BEFORE))
        self._attached_cold_on('dest')
        self._guest_reads(BEFORE)
        # The guest writes on the destination, then the resize is undone.
        self._guest_writes(MOVED)

        self._revert_resize(self.server)
        self.assertTrue(self._origin_holds(MOVED))
        self._attached_cold_on('src')
        self._guest_reads(MOVED)


class ResizeRevertWriteThroughTest(ResizeRevertTest):
    specs = lm._specs('firepan', write_policy='write_through')
    write_policy = 'write_through'


class RebuildTest(_ActionBase):

    def test_rebuild_writes_back_and_reattaches_the_data_volume(self):
        body = self._build_server(networks='none', host='src')
        server = self.api.post_server({'server': body})
        self.server = self._wait_for_state_change(server, 'ACTIVE')
        self._attach_volume(self.server, lm.VOLUME)
        self._guest_writes(BEFORE)

        # The compute detaches the data volume only on the server's host.
        self._acting_as('src')
        self._rebuild_server(self.server, self.server['image']['id'])
        self.assertTrue(self._origin_holds(BEFORE))
        self._attached_cold_on('src')
        self._guest_reads(BEFORE)


# GlanceFixture's first image.
IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'


class VolumeBackedRebuildTest(_ActionBase):
    """A rebuild that reimages the boot volume (microversion 2.93).

    Nova detaches the volume (the agent writes its dirty blocks back and
    forgets its cache), Cinder writes the image over the volume, and Nova
    attaches it again: cold, so the guest reads the image, not the cache
    it had.  Cinder's side is a stand-in doing what its reimage does:
    ``CinderFixture.reimage_volume`` accepts only its own image-backed
    volume and never sends the ``volume-reimaged`` event Nova waits for.
    """

    def test_reimage_writes_back_then_attaches_cold(self):
        self._boot_from_volume()
        self._guest_writes(BEFORE)
        seen = []

        def reimage_volume(*args, **kwargs):
            self.assertIn(lm.VOLUME, args)
            self.assertTrue(kwargs.get('reimage_reserved'))
            # What the volume held when Cinder started: the guest's writes,
            # and no agent caching it any more.
            seen.append((self._origin_holds(BEFORE), [
                self._client(h).list_volumes()['volumes']
                for h in ('src', 'dest')]))
            with open(self.origin.path, 'r+b') as f:
                f.write(bytes([MOVED]) * SPAN)
            self.api.create_server_external_events([{
                'name': 'volume-reimaged', 'server_uuid': self.server['id'],
                'tag': lm.VOLUME}])
        # CinderFixture has put a mock there; it does what Cinder does.
        self.useFixture(fixtures.MockPatchObject(
            nova_cinder.API.reimage_volume, 'side_effect', reimage_volume))

        self.api.microversion = '2.93'
        self._rebuild_server(self.server, IMAGE)
        self.assertEqual([(True, [[], []])], seen)
        self._attached_cold_on('src')
        self._guest_reads(MOVED)


class OnlineExtendTest(_ActionBase):
    """Cinder's extend of the volume in use, through Nova's external event.

    The guest disk's reopen and resize in QEMU are recorded, not run:
    fakelibvirt has no QEMU (tests/real_libvirt/test_extend.py runs them).
    """

    def test_extend_grows_the_export(self):
        self._boot_from_volume()
        self._guest_writes(BEFORE)
        grown = []
        self.useFixture(fixtures.MockPatch(
            'nova_ext.virt.extend.grow_guest_disk',
            side_effect=lambda domain, disk, size, delay: grown.append(
                (disk['target'], disk['socket'], size))))
        # fakelibvirt's domain XML gives a network disk neither its export
        # name, its unix socket nor libvirt's node index, which
        # guest_disk reads from a real one: they are put back before
        # guest_disk reads it.
        real_guest_disk = extend.guest_disk

        def guest_disk(xml, socket):
            tree = etree.fromstring(xml)
            for disk in tree.findall('./devices/disk'):
                source = disk.find('source')
                alias = disk.find('alias')
                if alias is not None and \
                        alias.get('name') == 'ua-' + lm.VOLUME:
                    source.set('name', lm.VOLUME)
                    host = source.find('host')
                    host.attrib.clear()
                    host.set('transport', 'unix')
                    host.set('socket', socket)
                    source.set('index', '1')
            return real_guest_disk(etree.tostring(tree, encoding='unicode'),
                                   socket)
        self.useFixture(fixtures.MockPatch(
            'nova_ext.virt.extend.guest_disk', side_effect=guest_disk))
        new_size = lm.VOLUME_SIZE + 32 * MiB
        self.origin.grow(new_size)

        self.api.create_server_external_events([{
            'name': 'volume-extended', 'server_uuid': self.server['id'],
            'tag': lm.VOLUME}])

        shown = self._attached_on('src')
        self.assertEqual(new_size, shown['size'])
        socket = shown['export_uri'].split('socket=', 1)[1]
        self.assertEqual([('vda', socket, new_size)], grown)
        # The cache kept its dirty blocks; the guest writes past the old
        # end and reads both back.
        self.assertEqual(SPAN // shown['block_size'], shown['dirty_blocks'])
        self._guest_io(shown['export_uri'],
                       'write -P %d %d %d' % (MOVED, lm.VOLUME_SIZE, SPAN),
                       'read -P %d %d %d' % (MOVED, lm.VOLUME_SIZE, SPAN),
                       'read -P %d 0 %d' % (BEFORE, SPAN))
        self._stop_server(self.server)
        self._start_server(self.server)
        with open(self.origin.path, 'rb') as f:
            data = f.read()
        self.assertEqual(new_size, len(data))
        self.assertEqual(bytes([BEFORE]) * SPAN, data[:SPAN])
        self.assertEqual(bytes([MOVED]) * SPAN,
                         data[lm.VOLUME_SIZE:lm.VOLUME_SIZE + SPAN])
