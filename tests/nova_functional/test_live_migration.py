"""Live migration of a VM with a cached volume through Nova, in process.

Nova 34 runs here with its own functional-test fixtures (the API, conductor,
scheduler, placement, two nova-compute services named ``src`` and ``dest``,
``CinderFixture``, ``NotificationFixture``), and both computes load our
driver the way an operator configures it: ``[DEFAULT] compute_driver =
fcache.FcacheLibvirtDriver``, imported by Nova from ``nova.virt.fcache``.
The server boots from a volume whose type carries ``fcache:`` specs and is
live-migrated through the compute API (``os-migrateLive``, the call behind
``openstack server migrate --live``).

Real: Nova's whole control path, our driver, the two fcache agents (one per
compute, the ASan build, each with its own cache file and migration
listener), nbdkit serving the shared volume, the cache transfer between the
agents over TCP, and qemu-io reading through the source agent's NBD export
to warm the cache the way a guest would.

Stand-ins, because they cannot run in Nova's functional environment:
libvirt/QEMU is Nova's fake libvirt (``LibvirtFixture``; its
``migrateToURI3`` is the stub of ``LibvirtMigrationMixin``, which creates
the destination domain from the XML Nova built); os-brick's iSCSI connector
is Nova's ``OSBrickFixture``, told to return the nbdkit URI as the device
path (an agent origin may be a path or an NBD URI); Cinder is
``CinderFixture``, whose connection_info for the volume is built with the
real ``cinder_ext.policy`` bridge from the type's specs.
"""

import nova.monkey_patch  # noqa: F401  (Nova: first, before anything else)

import os
import subprocess
import sys
from unittest import mock

import fixtures
from oslo_config import cfg
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids

from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional import integrated_helpers
from nova.tests.functional.libvirt import base
from nova.virt.libvirt import migration as libvirt_migration

from cinder_ext import policy as cinder_policy
from nova_ext import agent as agent_mod
from nova_ext import opts
from nova_ext.virt import driver as fcache_driver
from tests.functional import harness

CONF = cfg.CONF

VOLUME = uuids.fcache_volume
VOLUME_SIZE = 64 << 20
WARM_BYTES = 4 << 20
TYPE_SPECS = {'cacheable': '<is> True',
              'fcache:strategy': 'firepan',
              'fcache:cache_size': '16M',
              'fcache:write_policy': 'write_through',
              'fcache:rate_limit': '0'}


class FcacheLiveMigrationTest(base.LibvirtMigrationMixin,
                              base.ServersTestBase,
                              integrated_helpers.InstanceHelperMixin):
    microversion = 'latest'
    ADMIN_API = True

    def _setup_compute_service(self):
        # What nova.conf says on an fcache compute host.
        self.flags(compute_driver='fcache.FcacheLibvirtDriver')

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
        cinder_policy.add_to_connection_data(data, TYPE_SPECS)
        self.cinder.VOLUME_CONNECTION_INFO = dict(
            self.cinder.VOLUME_CONNECTION_INFO,
            **{VOLUME: {'driver_volume_type': 'iscsi', 'data': data}})
        # os-brick: the iSCSI connector "connects" the shared volume.
        self.useFixture(fixtures.MonkeyPatch(
            'os_brick.initiator.connectors.iscsi.ISCSIConnector.'
            'connect_volume',
            mock.Mock(return_value={'path': self.origin.uri,
                                    'type': 'block'})))

        self.flags(peer_agent_socket=os.path.join(
            self.workdir, '{host}', 'ctl.sock'), group='fcache')
        for host in ('src', 'dest'):
            # One process, one CONF: each driver reads its agent socket
            # when it starts, as each nova-compute would from its nova.conf.
            self.flags(agent_socket=self.agents[host].control_socket,
                       group='fcache')
            self.start_compute(hostname=host, host_info=fakelibvirt.HostInfo(
                cpu_nodes=1, cpu_sockets=1, cpu_cores=4, cpu_threads=1))
        self.src = self.computes['src']
        self.dest = self.computes['dest']
        self.assertIsInstance(self.src.driver,
                              fcache_driver.FcacheLibvirtDriver)
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
        self.origin = harness.NbdkitOrigin(self.workdir, 'shared', path)
        self.origin.start()
        self.addCleanup(self.origin.stop)
        self.agents = {}
        for host in ('src', 'dest'):
            agent = harness.Agent(binary, self.workdir, name=host,
                                  cache_size='64M', log_level='info')
            agent.start()
            self.addCleanup(self._stop_agent, agent)
            self.agents[host] = agent

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

    def _warm_source_cache(self, export_uri):
        # A guest reading its disk: qemu-io over the agent's NBD export.
        subprocess.run(['qemu-io', '-r', '-f', 'raw', export_uri,
                        '-c', 'read 0 %d' % WARM_BYTES],
                       check=True, stdout=subprocess.DEVNULL, timeout=60)
        return self.agents['src'].show(VOLUME)

    def _versioned(self, event_type):
        return [n for n in self.notifier.versioned_notifications
                if n['event_type'] == event_type]

    # -- tests ---------------------------------------------------------------

    def test_boot_attaches_through_agent(self):
        self._boot_from_volume()
        data = self._connection_data()
        # The policy reached nova-compute and the agent attached with it.
        self.assertEqual('firepan', data['fcache']['strategy'])
        vol = self.agents['src'].show(VOLUME)
        self.assertEqual(16 << 20, vol['cache_size'])
        self.assertEqual('write_through', vol['write_policy'])
        self.assertEqual(self.origin.uri, vol['origin'])
        # The guest disk is the agent's export, not the device path.
        export = data['fcache_export']
        self.assertTrue(export.startswith('nbd+unix://'))
        sock = export.split('socket=')[1]
        xml = self.defined_xml[-1]
        self.assertIn('<source protocol="nbd">', xml)
        self.assertIn('<host transport="unix" socket="%s"/>' % sock, xml)
        self.assertNotIn(self.origin.uri, xml)

    def test_live_migration_moves_the_cache(self):
        self._boot_from_volume()
        before = self._warm_source_cache(self._connection_data()[
            'fcache_export'])
        self.assertGreaterEqual(before['cached_blocks'],
                                WARM_BYTES // before['block_size'])

        self._live_migrate(self.server)

        server = self.api.get_server(self.server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        # firepan: the memory migration ran with the guest paused, i.e.
        # after the cache copy that start() did.
        self.assertEqual(1, len(self.migrations))
        self.assertEqual(fakelibvirt.VIR_DOMAIN_PAUSED,
                         self.migrations[0]['source_state'])
        # The destination domain's disk is the destination agent's export.
        data = self._connection_data()
        dest_sock = os.path.join(self.agents['dest'].export_dir, '')
        self.assertEqual(1, len(self.dest_disk_xml))
        self.assertIn('<host transport="unix" socket="%s' % dest_sock,
                      self.dest_disk_xml[0])
        self.assertEqual(data['fcache_migration']['export_uri'],
                         data['fcache_export'])
        # The destination agent holds the cache; the source released it.
        after = self.agents['dest'].show(VOLUME)
        self.assertEqual(before['cached_blocks'], after['cached_blocks'])
        src_volumes = agent_mod.AgentClient(
            self.agents['src'].control_socket).list_volumes()['volumes']
        self.assertEqual([], src_volumes)
        # Notifications with the figures.
        start, = self._versioned('fcache.migration.start')
        end, = self._versioned('fcache.migration.end')
        self.assertEqual([], self._versioned('fcache.migration.error'))
        figures = end['payload']['nova_object.data']
        self.assertEqual('fcache.src', end['publisher_id'])
        self.assertEqual('firepan', figures['strategy'])
        self.assertEqual(VOLUME, figures['volume_id'])
        self.assertEqual(self.server['id'], figures['instance_uuid'])
        self.assertEqual(before['cached_blocks'] * before['block_size'],
                         figures['bytes_transferred'])
        self.assertGreater(figures['duration_s'], 0)
        self.assertIn('downtime_s', figures)
        self.assertIsNotNone(figures['hit_ratio_after'])
        self.assertEqual(figures['migration_id'],
                         start['payload']['nova_object.data'][
                             'migration_id'])

    def test_failure_at_destination_rolls_back(self):
        self._boot_from_volume()
        before = self._warm_source_cache(self._connection_data()[
            'fcache_export'])

        # Injected failure: the destination's pre_live_migration breaks
        # after its volumes were connected (and the cache migration
        # prepared), where a VIF plug failure would.
        with mock.patch.object(
                self.dest.driver, '_pre_live_migration_plug_vifs',
                side_effect=RuntimeError('injected destination failure')):
            # Nova records the rolled-back migration as 'error' or, when
            # the failure reaches it through another thread first, as
            # 'failed': either way the server stays ACTIVE on the source.
            self.api.post_server_action(
                self.server['id'],
                {'os-migrateLive': {'host': None, 'block_migration': 'auto'}})
            self._wait_for_migration_status(self.server, ['error', 'failed'])
            self._wait_for_state_change(self.server, 'ACTIVE')

        server = self.api.get_server(self.server['id'])
        self.assertEqual('src', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self.migrations)
        # The source kept its cache, usable; the destination holds nothing.
        after = self.agents['src'].show(VOLUME)
        self.assertEqual(before['cached_blocks'], after['cached_blocks'])
        self.assertEqual(before['origin'], after['origin'])
        self._warm_source_cache(self._connection_data()['fcache_export'])
        dest_volumes = agent_mod.AgentClient(
            self.agents['dest'].control_socket).list_volumes()['volumes']
        self.assertEqual([], dest_volumes)
        errors = self._versioned('fcache.migration.error')
        self.assertEqual(1, len(errors))
        self.assertEqual('fcache.dest', errors[0]['publisher_id'])
        self.assertEqual('pre_live_migration',
                         errors[0]['payload']['nova_object.data']['phase'])
        self.assertEqual([], self._versioned('fcache.migration.end'))
