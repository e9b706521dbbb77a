# SPDX-License-Identifier: Apache-2.0
"""Live migration of a VM with a cached volume through Nova, in process.

Nova 34 runs here with its own functional-test fixtures (the API, conductor,
scheduler, placement, two nova-compute services named ``src`` and ``dest``,
``CinderFixture``, ``NotificationFixture``), and both computes load our
driver the way an operator configures it: ``[DEFAULT] compute_driver =
fcache.FcacheLibvirtDriver``, imported by Nova from ``nova.virt.fcache``.
The server boots from a volume whose type carries ``fcache:`` specs and is
live-migrated through the compute API (``os-migrateLive``, the call behind
``openstack server migrate --live``).

Each compute reaches only its own agent (no ``[fcache] peer_agent_socket``)
except in the tests of a failure after the switchover, where the source
settles with the destination's agent.

Real: Nova's whole control path, our driver, the two fcache agents (one per
compute, the ASan build, each with its own cache file and migration
listener), the shared volume as each compute's disk (a block device node
``/dev/sdfc<N>``, each host's its own, both over the volume's file:
:mod:`tests.nova_functional.luns`), the cache transfer between the agents
over TCP, and qemu-io doing the guest's I/O through the agents' NBD
exports (on the source before the migration, on the destination from the
moment of the switchover).

Stand-ins, because they cannot run in Nova's functional environment:
libvirt/QEMU is Nova's fake libvirt (``LibvirtFixture``; its
``migrateToURI3`` is the stub of ``LibvirtMigrationMixin``, which creates
the destination domain from the XML Nova built); os-brick's iSCSI
connector's ``connect_volume`` (this kernel has no ``iscsi_tcp``: no
initiator logs in here) answers what it would for the volume's LUN, the
calling host's disk; Cinder is ``CinderFixture``, whose connection_info
for the volume is built with the real ``cinder_ext.policy`` bridge from
the type's specs.
"""

import nova.monkey_patch  # noqa: F401  (Nova: first, before anything else)

import os
import subprocess
import sys
import time
from unittest import mock

import fixtures
from oslo_config import cfg
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids
import testscenarios
import testtools

from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional import integrated_helpers
from nova.tests.functional.libvirt import base
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import migration as libvirt_migration

from cinder_ext import policy as cinder_policy
from fcache_testkit import harness
from nova_ext import agent as agent_mod
from nova_ext import migration as migration_mod
from nova_ext import opts
from nova_ext.virt import channel
from nova_ext.virt import driver as fcache_driver
from nova_ext.virt import outgoing
from tests.nova_functional import luns
from tests.nova_functional import patience
from tests.nova_functional import tcpproxy

CONF = cfg.CONF

VOLUME = uuids.fcache_volume
VOLUME_SIZE = 64 << 20
MiB = 1 << 20
# The guest's I/O before the migration: it writes DIRTY bytes (dirty
# blocks with write_back) and reads WARM bytes (the first DIRTY of them
# the data it wrote).
DIRTY = 1 * MiB
WARM = 4 * MiB
PATTERN = 0x5a
COPYING = ('firepan', 'firepan_if', 'cloudcache', 'hybrid')
ON_DEMAND = ('cloudcache', 'hybrid')
WARMING = COPYING + ('cachemior',)


def _specs(strategy, write_policy='write_back', rate_limit=0):
    return {'cacheable': '<is> True',
            'fcache:strategy': strategy,
            'fcache:cache_size': '16M',
            'fcache:write_policy': write_policy,
            'fcache:rate_limit': str(rate_limit)}


class _Base(patience.MigrationPatienceMixin, base.LibvirtMigrationMixin,
            base.ServersTestBase, integrated_helpers.InstanceHelperMixin):
    microversion = 'latest'
    ADMIN_API = True
    specs = _specs('firepan', write_policy='write_through')
    # The shared volume through nbdkit instead of a disk: for a test that
    # makes the storage unreachable and back (stops the server).
    nbd_origin = False
    # The source host's [DEFAULT] compute_driver (a mixed fleet's test may
    # run Nova's own there).
    src_driver = 'fcache.FcacheLibvirtDriver'

    def _setup_compute_service(self):
        # What nova.conf says on an fcache compute host.
        self.flags(compute_driver='fcache.FcacheLibvirtDriver')

    def _fcache_flags(self, host):
        """``[fcache]`` of host's nova.conf besides agent_socket."""
        return {'peer_agent_socket': None, 'migration_address': None}

    def setUp(self):
        # The API paste config ships in the nova wheel's data files.
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        super().setUp()
        opts.register_opts(CONF)
        self.workdir = self.useFixture(fixtures.TempDir()).path
        self._start_storage_and_agents()

        # Cinder: the volume type's policy, through the real bridge.
        data = {'target_lun': '1', 'cacheable': True}
        cinder_policy.add_to_connection_data(data, self.specs)
        self.cinder.VOLUME_CONNECTION_INFO = dict(
            self.cinder.VOLUME_CONNECTION_INFO,
            **{VOLUME: {'driver_volume_type': 'iscsi', 'data': data}})
        # os-brick: the iSCSI connector "connects" the shared volume.
        self._connect_storage()

        for host in ('src', 'dest'):
            # One process, one CONF: each driver reads these options when
            # it starts, as each nova-compute would from its nova.conf.
            self.flags(agent_socket=self.agents[host].control_socket,
                       group='fcache', **self._fcache_flags(host))
            self.start_compute(hostname=host, host_info=fakelibvirt.HostInfo(
                cpu_nodes=1, cpu_sockets=1, cpu_cores=4, cpu_threads=1))
        self.src = self.computes['src']
        self.dest = self.computes['dest']
        self.assertIsInstance(self.src.driver, {
            'fcache.FcacheLibvirtDriver': fcache_driver.FcacheLibvirtDriver,
            'libvirt.LibvirtDriver': libvirt_driver.LibvirtDriver,
        }[self.src_driver])
        self.migrations = []
        # Record the domain XML Nova hands to (fake) libvirt: the fake
        # regenerates its own XML, which knows no network disks.
        self.defined_xml = []
        define = fakelibvirt.Connection.defineXML

        def record(conn, xml):
            self.defined_xml.append(xml)
            return define(conn, xml)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Connection.defineXML', record))
        # Record the destination disk configuration Nova computes for each
        # volume from migrate_data.bdms.  (_update_volume_xml merges it into
        # the domain XML by <serial>; the fake's XMLDesc renders no serial,
        # so the merge itself cannot be observed in params.)
        self.dest_disk_xml = []
        update = libvirt_migration.get_updated_guest_xml

        def record_update(instance, guest, migrate_data, get_volume_config,
                          *args, **kwargs):
            for bdmi in migrate_data.bdms:
                self.dest_disk_xml.append(get_volume_config(
                    bdmi.connection_info, bdmi.as_disk_info()).to_xml())
            return update(instance, guest, migrate_data, get_volume_config,
                          *args, **kwargs)
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.migration.get_updated_guest_xml',
            record_update))

    def _start_storage_and_agents(self):
        binary = harness.ensure_asan_agent(self.workdir)
        path = os.path.join(self.workdir, 'volume.img')
        harness.make_origin_file(path, VOLUME_SIZE, seed=5)
        with open(path, 'rb') as f:
            self.original = f.read()
        if self.nbd_origin:
            self.origin = harness.NbdkitOrigin(self.workdir, 'shared', path)
            self.origin.start()
            self.addCleanup(self.origin.stop)
        else:
            self.origin = self.useFixture(luns.SharedLun(path,
                                                         ('src', 'dest')))
        self.agents = {}
        for host in ('src', 'dest'):
            # Write-back at most hourly: the guest's writes stay dirty in
            # the source cache until they move (or are settled).
            agent = harness.Agent(binary, self.workdir, name=host,
                                  cache_size='64M', log_level='info',
                                  writeback_interval_ms=3600000)
            agent.start()
            self.addCleanup(self._stop_agent, agent)
            self.agents[host] = agent

    def _connect_storage(self):
        """os-brick's iSCSI connector, which cannot run here.

        It answers with the disk of the calling host (a real block
        device: see :mod:`tests.nova_functional.luns`) -- or, for a test
        that sets ``nbd_origin``, with nbdkit's NBD URI: an agent origin
        may be one, but os-brick's iSCSI connector never returns one.
        """
        if self.nbd_origin:
            self.useFixture(fixtures.MonkeyPatch(
                'os_brick.initiator.connectors.iscsi.ISCSIConnector.'
                'connect_volume',
                mock.Mock(return_value={'path': self.origin.uri,
                                        'type': 'block'})))
        else:
            luns.iscsi_connector(
                self, lambda host, props: self.origin.devices[host])

    def _origin_on(self, host):
        """The volume's origin as host's agent names it."""
        if self.nbd_origin:
            return self.origin.uri
        return self.origin.devices[host]

    def _stop_agent(self, agent):
        agent.stop()
        self.assertEqual([], agent.sanitizer_reports())

    def _migrate_stub(self, domain, destination, params, flags):
        # Record what the memory migration saw, then let the mixin's stub
        # create the destination domain from the XML Nova built.
        conn = self.src.driver._host.get_connection()
        dom = conn.lookupByUUIDString(self.server['id'])
        self.migrations.append({'source_state': dom.info()[0],
                                'destination_xml':
                                params['destination_xml']})
        super()._migrate_stub(domain, destination, params, flags)

    # -- helpers -----------------------------------------------------------

    def _client(self, host):
        return agent_mod.AgentClient(self.agents[host].control_socket)

    def _boot_from_volume(self):
        body = self._build_server(networks='none', host='src')
        body['imageRef'] = ''
        body['block_device_mapping_v2'] = [{
            'boot_index': 0, 'uuid': VOLUME, 'source_type': 'volume',
            'destination_type': 'volume'}]
        server = self.api.post_server({'server': body})
        self.server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual('src', self.server['OS-EXT-SRV-ATTR:host'])
        return self.server

    def _connection_data(self):
        bdm = objects.BlockDeviceMapping.get_by_volume_and_instance(
            nova_context.get_admin_context(), VOLUME, self.server['id'])
        return jsonutils.loads(bdm.connection_info)['data']

    def _guest_io(self, export_uri, *commands):
        """The guest's I/O: qemu-io over an agent's NBD export."""
        args = ['qemu-io', '-f', 'raw', export_uri]
        for command in commands:
            args += ['-c', command]
        out = subprocess.run(args, check=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=60).stdout
        self.assertNotIn(b'verification failed', out)
        self.assertNotIn(b'error', out.lower())

    def _warm_source_cache(self):
        """Write DIRTY bytes of PATTERN, read WARM bytes twice, on the source.

        Read twice: a working set the guest reuses, which cloudcache's
        background copy sends (CloudCache's reuse working set; a block read
        once is left to the destination's misses).
        """
        self._guest_io(self._connection_data()['fcache_export'],
                       'write -P %d 0 %d' % (PATTERN, DIRTY),
                       'read 0 %d' % WARM, 'read 0 %d' % WARM)
        return self.agents['src'].show(VOLUME)

    def _expected_origin(self):
        return bytes([PATTERN]) * DIRTY + self.original[DIRTY:]

    def _check_origin_after_delete(self):
        """Delete the server: the destination flushes and detaches."""
        self._delete_server(self.server)
        self.assertEqual([], self._client('dest').list_volumes()['volumes'])
        with open(self.origin.path, 'rb') as f:
            data = f.read()
        self.assertTrue(data == self._expected_origin(),
                        'the origin differs from what the guest wrote')

    def _versioned(self, event_type):
        return [n for n in self.notifier.versioned_notifications
                if n['event_type'] == event_type]

    def _wait_dest_state(self, mid, states, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            st = migration_mod.status(self._client('dest'), mid)
            if st['state'] in states or time.monotonic() > deadline:
                return st
            time.sleep(0.02)

    def _after_switchover(self, hook):
        """Run ``hook(mid)`` right after the source's switchover."""
        real = migration_mod.switchover

        def switchover(src, dst, mid):
            result = real(src, dst, mid)
            hook(mid)
            return result
        return mock.patch.object(migration_mod, 'switchover',
                                 side_effect=switchover)

    def _live_migrate_rolled_back(self):
        """Live-migrate the server; the attempt fails and rolls back."""
        # Nova records the rolled-back migration as 'error' or, when the
        # failure reaches it through another thread first, as 'failed':
        # either way the server stays ACTIVE on the source.
        self.api.post_server_action(
            self.server['id'],
            {'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
        self._wait_for_migration_status(self.server, ['error', 'failed'])
        self._wait_for_state_change(self.server, 'ACTIVE')
        server = self.api.get_server(self.server['id'])
        self.assertEqual('src', server['OS-EXT-SRV-ATTR:host'])


class FcacheLiveMigrationTest(_Base):
    """Attach, and a failure before the switchover."""

    def test_boot_attaches_through_agent(self):
        self._boot_from_volume()
        data = self._connection_data()
        # The policy reached nova-compute and the agent attached with it.
        self.assertEqual('firepan', data['fcache']['strategy'])
        vol = self.agents['src'].show(VOLUME)
        self.assertEqual(16 << 20, vol['cache_size'])
        self.assertEqual('write_through', vol['write_policy'])
        self.assertEqual(self._origin_on('src'), vol['origin'])
        # The guest disk is the agent's export, not the device path.
        export = data['fcache_export']
        self.assertTrue(export.startswith('nbd+unix://'))
        name, sock = export[len('nbd+unix:///'):].split('?socket=')
        # The export opens only under its secret name, which the guest's
        # XML carries as the NBD export name.
        self.assertEqual(32, len(name))
        xml = self.defined_xml[-1]
        self.assertIn('<source protocol="nbd" name="%s">' % name, xml)
        self.assertIn('<host transport="unix" socket="%s"/>' % sock, xml)
        self.assertNotIn(self._origin_on('src'), xml)

    def test_failure_at_destination_rolls_back(self):
        self._boot_from_volume()
        before = self._warm_source_cache()

        # Injected failure: the destination's pre_live_migration breaks
        # after its volumes were connected (and the cache migration
        # prepared), where a VIF plug failure would.
        with mock.patch.object(
                self.dest.driver, '_pre_live_migration_plug_vifs',
                side_effect=RuntimeError('injected destination failure')):
            self._live_migrate_rolled_back()
        self.assertEqual([], self.migrations)
        # The source kept its cache, usable; the destination holds nothing.
        after = self.agents['src'].show(VOLUME)
        self.assertEqual(before['cached_blocks'], after['cached_blocks'])
        self.assertEqual(before['origin'], after['origin'])
        self._guest_io(self._connection_data()['fcache_export'],
                       'read -P %d 0 %d' % (PATTERN, DIRTY))
        self.assertEqual([], self._client('dest').list_volumes()['volumes'])
        errors = self._versioned('fcache.migration.error')
        self.assertEqual(1, len(errors))
        self.assertEqual('fcache.dest', errors[0]['publisher_id'])
        self.assertEqual('pre_live_migration',
                         errors[0]['payload']['nova_object.data']['phase'])
        self.assertEqual([], self._versioned('fcache.migration.end'))

    def test_failure_to_start_rolls_back_both_sides(self):
        self._boot_from_volume()
        before = self._warm_source_cache()
        # The source cannot reach the destination's migration listener.
        with mock.patch.object(
                self.dest.driver, '_fcache_migration_address',
                '127.0.0.1:1'):
            self._live_migrate_rolled_back()
        self.assertEqual([], self.migrations)
        after = self.agents['src'].show(VOLUME)
        self.assertEqual(before['cached_blocks'], after['cached_blocks'])
        self.assertEqual(before['dirty_blocks'], after['dirty_blocks'])
        # Nova's rollback reached the destination, which aborted its side.
        self._wait_for_volumes_gone('dest')
        error, = self._versioned('fcache.migration.error')
        self.assertEqual('fcache.src', error['publisher_id'])
        self.assertEqual('start', error['payload']['nova_object.data'][
            'phase'])
        self._guest_io(self._connection_data()['fcache_export'],
                       'read -P %d 0 %d' % (PATTERN, DIRTY))

    def _wait_for_volumes_gone(self, host, timeout=10):
        deadline = time.monotonic() + timeout
        while self._client(host).list_volumes()['volumes']:
            self.assertLess(time.monotonic(), deadline,
                            '%s agent still holds a volume' % host)
            time.sleep(0.05)


class SilentSourceTest(_Base):
    """A source that says nothing of a write_back volume's cache.

    The destination takes it for a host without fcache
    (test_mixed_fleet.FromPlainHostTest) and connects the volume
    uncached.  An fcache source that said nothing (a bug) still holds its
    dirty blocks: its last check before the memory migration finds the
    volume unprepared and rolls back.
    """
    specs = _specs('firepan', write_policy='write_back')

    def test_rolled_back_by_the_source(self):
        self._boot_from_volume()
        before = self._warm_source_cache()
        self.assertGreater(before['dirty_blocks'], 0)
        with mock.patch.object(channel, 'offer_sources'):
            self._live_migrate_rolled_back()
        after = self.agents['src'].show(VOLUME)
        self.assertEqual(before['dirty_blocks'], after['dirty_blocks'])
        self.assertEqual([], self._client('dest').list_volumes()['volumes'])
        self.assertEqual([], self._versioned('fcache.migration.start'))
        self.assertIn('arrives from src, which does not run fcache',
                      self.stdlog.logger.output)
        self.assertIn('did not prepare the cache of write_back volume(s) %s'
                      % VOLUME, self.stdlog.logger.output)
        self._guest_io(self._connection_data()['fcache_export'],
                       'read -P %d 0 %d' % (PATTERN, DIRTY))


class FcacheAdmissionTest(_Base):
    """A type's admission, rws_n and staging reach both agents."""

    specs = dict(_specs('firepan', write_policy='write_through'),
                 **{'fcache:admission': 'rws', 'fcache:rws_n': '2',
                    'fcache:staging': 'address'})

    def setUp(self):
        super().setUp()
        # What each driver asks its agent: (control socket, op, args).
        self.agent_calls = []
        call = agent_mod.AgentClient.call

        def record(client, op, **args):
            self.agent_calls.append((client.socket_path, op, args))
            return call(client, op, **args)
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.agent.AgentClient.call', record))

    def _sent(self, host, op):
        return [args for path, name, args in self.agent_calls
                if path == self.agents[host].control_socket and name == op]

    def test_attach_sends_the_type_admission(self):
        self._boot_from_volume()
        data = self._connection_data()
        self.assertEqual({'admission': 'rws', 'rws_n': 2,
                          'staging': 'address'},
                         {k: data['fcache'][k]
                          for k in ('admission', 'rws_n', 'staging')})
        attach, = self._sent('src', 'volume-attach')
        self.assertEqual(('rws', 2, 'address'), (
            attach['admission'], attach['rws_n'], attach['staging']))
        vol = self.agents['src'].show(VOLUME)
        self.assertEqual('rws', vol['admission'])

    def test_live_migration_carries_the_admission(self):
        self._boot_from_volume()
        self._warm_source_cache()
        self._live_migrate(self.server)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        # The source read them back from its agent; the destination
        # attached with them.
        incoming, = self._sent('dest', 'migration-incoming')
        self.assertEqual(('rws', 2, 'address'), (
            incoming['admission'], incoming['rws_n'], incoming['staging']))
        vol = self.agents['dest'].show(VOLUME)
        self.assertEqual('rws', vol['admission'])
        self.assertEqual(2, vol['allocation']['rws_n'])
        self.assertEqual('address', vol['allocation']['staging']['kind'])
        self._check_origin_after_delete()


class FcacheStrategyHintTest(_Base):
    """A strategy handed to the source agent wins over the volume type's.

    ``fcache evacuate`` plans a strategy per volume and, since Nova's
    os-migrateLive carries none, sets it on the source's agent
    (``volume-hint``) just before the migration.
    """

    specs = _specs('firepan', write_policy='write_through')

    def test_hint_overrides_the_type(self):
        self._boot_from_volume()
        self._warm_source_cache()
        self._client('src').set_strategy_hint(VOLUME, 'hybrid', ttl_s=300)
        shown = self._client('src').show_volume(VOLUME)
        self.assertEqual('hybrid', shown['strategy_hint']['strategy'])
        self._live_migrate(self.server)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        end, = self._versioned('fcache.migration.end')
        self.assertEqual('hybrid', end['payload']['nova_object.data'][
            'strategy'])
        # The type said firepan, which pauses the guest for the copy.
        self.assertEqual(fakelibvirt.VIR_DOMAIN_RUNNING,
                         self.migrations[0]['source_state'])
        self._check_origin_after_delete()


class FcacheStrategyTest(testscenarios.WithScenarios, _Base):
    """Every strategy through Nova: the cache moves, nothing is lost.

    The guest has written (write_back: dirty on the source) and read before
    the migration; right after the switchover it reads what it wrote
    through the destination agent (on-demand strategies fetch it from the
    source cache then: the transfer is rate limited so that the background
    copy is still running).
    """

    scenarios = [
        ('none', {'strategy': 'none', 'rate_limit': 0}),
        ('cachemior', {'strategy': 'cachemior', 'rate_limit': 0}),
        ('firepan', {'strategy': 'firepan', 'rate_limit': 0}),
        ('firepan_if', {'strategy': 'firepan_if', 'rate_limit': 4}),
        ('cloudcache', {'strategy': 'cloudcache', 'rate_limit': 2}),
        ('hybrid', {'strategy': 'hybrid', 'rate_limit': 2}),
    ]

    @property
    def specs(self):
        return _specs(self.strategy, rate_limit=self.rate_limit)

    def test_live_migration_moves_the_cache(self):
        self._boot_from_volume()
        before = self._warm_source_cache()
        bs = before['block_size']
        self.assertGreaterEqual(before['cached_blocks'], WARM // bs)
        self.assertEqual(DIRTY // bs, before['dirty_blocks'])
        at_switch = {}

        def guest_on_destination(mid):
            # The VM runs on the destination from here on.
            export = self.agents['dest'].show(VOLUME)['export_uri']
            self._guest_io(export, 'read -P %d 0 %d' % (PATTERN, DIRTY))
            at_switch.update(migration_mod.status(self._client('dest'), mid))

        with self._after_switchover(guest_on_destination):
            self._live_migrate(self.server)

        server = self.api.get_server(self.server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(self.migrations))
        # firepan: the memory migration ran with the guest paused, i.e.
        # after the cache copy start() did; the others never pause it.
        self.assertEqual(fakelibvirt.VIR_DOMAIN_PAUSED
                         if self.strategy == 'firepan'
                         else fakelibvirt.VIR_DOMAIN_RUNNING,
                         self.migrations[0]['source_state'])
        # The destination domain's disk is the destination agent's export.
        data = self._connection_data()
        dest_sock = os.path.join(self.agents['dest'].export_dir, '')
        self.assertEqual(1, len(self.dest_disk_xml))
        self.assertIn('<host transport="unix" socket="%s' % dest_sock,
                      self.dest_disk_xml[0])
        self.assertEqual(data['fcache_migration']['export_uri'],
                         data['fcache_export'])
        # The spent token and the source's figures left the BDM.
        self.assertNotIn('token', data['fcache_migration'])
        # migration_tls = pinned, the agents' default: each agent pinned
        # the other's certificate, of which only the fingerprint went
        # through Nova.
        self.assertEqual(64, len(data['fcache_migration']['fingerprint']))
        self.assertIn('authenticated (TLS pinned)',
                      self.agents['dest'].log())
        self.assertNotIn('fcache_result', data)
        # The source released the volume once the destination held it.
        self.assertEqual([], self._client('src').list_volumes()['volumes'])
        self.assertEqual(0, self._client('src').status()['used_bytes'])

        start, = self._versioned('fcache.migration.start')
        end, = self._versioned('fcache.migration.end')
        self.assertEqual([], self._versioned('fcache.migration.error'))
        self.assertEqual('fcache.src', start['publisher_id'])
        self.assertEqual('fcache.dest', end['publisher_id'])
        figures = end['payload']['nova_object.data']
        self.assertEqual(self.strategy, figures['strategy'])
        self.assertEqual(VOLUME, figures['volume_id'])
        self.assertEqual(self.server['id'], figures['instance_uuid'])
        self.assertEqual(figures['migration_id'],
                         start['payload']['nova_object.data'][
                             'migration_id'])
        self.assertGreater(figures['duration_s'], 0)
        self.assertIsNotNone(figures['hit_ratio_after'])
        if self.strategy == 'firepan':
            self.assertEqual(before['cached_blocks'] * bs,
                             figures['bytes_transferred'])
        elif self.strategy == 'none':
            self.assertEqual(0, figures['bytes_transferred'])
        else:
            # Blocks, or cachemior's hot list (8 bytes a block).
            self.assertGreater(figures['bytes_transferred'], 0)
        if self.strategy in ON_DEMAND:
            # The guest's first read on the destination missed blocks whose
            # copy had not arrived: the source cache served them.
            self.assertGreater(at_switch['fetched_blocks'], 0, at_switch)

        # The rest of what the guest read before, through the destination.
        dest = self.agents['dest'].show(VOLUME)
        self._guest_io(data['fcache_export'], 'read %d %d' % (
            DIRTY, WARM - DIRTY))
        after = self.agents['dest'].show(VOLUME)
        hits = after['read_hits'] - dest['read_hits']
        misses = after['read_misses'] - dest['read_misses']
        blocks = (WARM - DIRTY) // bs
        if self.strategy in WARMING:
            # Served from the migrated cache, not the shared storage.
            self.assertGreaterEqual(hits, 0.9 * blocks, (hits, misses))
            self.assertLessEqual(
                after['origin_read_bytes'] - dest['origin_read_bytes'],
                0.1 * (WARM - DIRTY))
        else:
            self.assertGreaterEqual(misses, 0.9 * blocks, (hits, misses))
        self._check_origin_after_delete()


class FcacheFailureAfterSwitchoverTest(testscenarios.WithScenarios, _Base):
    """The migration network fails right after the switchover.

    The VM already runs on the destination, so nothing can be rolled back.
    The source's dirty blocks had not all moved (cloudcache, rate limited,
    least recently used last): they must reach the origin before the
    destination lets the origin answer for them.  The source settles at
    once: with a peer socket by relaying between both agents, without one
    through its own agent, which settles with the destination's over the
    migration network once the link is back (``through``); if the link
    stays down (``down``), it says how and the operator does.
    """

    scenarios = [('peer', {'peer': True, 'down': False}),
                 ('through', {'peer': False, 'down': False}),
                 ('down', {'peer': False, 'down': True})]
    specs = _specs('cloudcache', rate_limit=1)

    def setUp(self):
        self.proxy = None
        super().setUp()

    def _start_storage_and_agents(self):
        super()._start_storage_and_agents()
        self.proxy = tcpproxy.TcpProxy(
            self.agents['dest'].settings['migration_listen'])
        self.addCleanup(self.proxy.close)

    def _fcache_flags(self, host):
        flags = super()._fcache_flags(host)
        if host == 'src' and self.peer:
            flags['peer_agent_socket'] = os.path.join(
                self.workdir, '{host}', 'ctl.sock')
        if host == 'dest':
            flags['migration_address'] = self.proxy.address
        return flags

    def test_link_lost_after_switchover_is_settled(self):
        self._boot_from_volume()
        self._warm_source_cache()

        def cut(mid):
            st = self._wait_dest_state(mid, ('switched', 'completed'))
            self.assertEqual('switched', st['state'])
            self.assertGreater(st['remote_dirty_blocks'], 0, st)
            self.proxy.cut(down=self.down)

        with self._after_switchover(cut):
            self._live_migrate(self.server)

        # Through the agents: the settle session is a second connection.
        self.assertEqual(1 if self.peer or self.down else 2,
                         self.proxy.connections)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self._versioned('fcache.migration.end'))
        error, = self._versioned('fcache.migration.error')
        self.assertEqual('fcache.src', error['publisher_id'])
        payload = error['payload']['nova_object.data']
        self.assertEqual('finish', payload['phase'])
        mid = payload['migration_id']
        if not self.down:
            settle = payload['settle']
            self.assertEqual('settled', settle['state'], settle)
            self.assertEqual('missing', settle['mode'])
            self.assertGreater(settle['blocks'], 0)
            self.assertEqual(0, settle['given_up_blocks'])
            if not self.peer:
                self.assertEqual('source', settle['settled_from'])
        else:
            self.assertEqual('unsettled', payload['settle']['state'])
            self.assertIn('peer_agent_socket', payload['settle']['reason'])
            # Both agents hold the volume: the source never writes back
            # what may be stale, the destination refuses what only the
            # source has.  The operator settles (doc/reference/nova.rst).
            self.assertEqual('failed', migration_mod.status(
                self._client('dest'), mid)['state'])
            self.assertEqual(1, len(
                self._client('src').list_volumes()['volumes']))
            subprocess.run(
                [sys.executable, '-m', 'nova_ext.cli', 'migrate', VOLUME,
                 '--from', self.agents['src'].control_socket,
                 '--to', self.agents['dest'].control_socket,
                 '--migration', mid, '--phase', 'settle'],
                check=True, stdout=subprocess.DEVNULL, timeout=60)
        self.assertEqual('settled', migration_mod.status(
            self._client('dest'), mid)['state'])
        self.assertEqual([], self._client('src').list_volumes()['volumes'])
        # The guest reads what it wrote, through the destination.
        self._guest_io(self._connection_data()['fcache_export'],
                       'read -P %d 0 %d' % (PATTERN, DIRTY))
        self._check_origin_after_delete()


class DmcacheDestinationHoldsGuestTest(testtools.TestCase):
    """A volume on dmcache at the destination: the guest arrives paused.

    (No dmcache agent runs in this process: the kernel data path needs
    device-mapper, tested in user-mode-linux; what is checked here is the
    flag the driver hands libvirt.)
    """

    def test_flag_only_for_a_device_export(self):
        ucache = {'export_uri': 'nbd+unix:///v?socket=/run/fcache/v.sock'}
        dmcache = {'export_uri': '/dev/mapper/fcache-v'}
        self.assertFalse(outgoing.hold_guest_at_destination([ucache]))
        self.assertTrue(outgoing.hold_guest_at_destination([ucache,
                                                            dmcache]))
        guest = mock.Mock()
        outgoing.PausedAtDestination(guest).migrate(
            'qemu+tcp://dst/system', flags=fakelibvirt.VIR_MIGRATE_LIVE,
            bandwidth=0)
        guest.migrate.assert_called_once_with(
            'qemu+tcp://dst/system', bandwidth=0,
            flags=fakelibvirt.VIR_MIGRATE_LIVE |
            32)    # VIR_MIGRATE_PAUSED (not in fakelibvirt)
        # Everything else is the guest's own.
        self.assertIs(outgoing.PausedAtDestination(guest).get_xml_desc,
                      guest.get_xml_desc)
