# SPDX-License-Identifier: Apache-2.0
"""Cache-aware balancing and host evacuation through Nova, in process.

Nova 34 runs with its own functional-test fixtures (API, conductor,
scheduler, placement, ``CinderFixture``, ``NotificationFixture``) and three
nova-compute services, ``h1``, ``h2`` and ``h3``, each loading our driver
and driving its own fcache agent, as in test_live_migration.py.

Real: the balancer's loop (nova_ext.balancer.service.BalancerLoop) and
``fcache evacuate`` (nova_ext.cli.main), reading every host's capacity and
predicted demand from the three real agents (the ``sockets`` source, the
ASan build, ``allocation_window = 1`` s, ``rws_predictor = last``) and
driving Nova through python-novaclient against Nova's real API
application: ``os-migrateLive``, ``servers``, ``os-services``,
``os-migrations``; Nova's whole live-migration path, our driver, the cache
moved between the agents by the volume type's strategy, each shared
volume as every host's own disk (block device nodes ``/dev/sdfc<N>`` over
loop devices over the volume's file: :mod:`tests.nova_functional.luns`),
qemu-io doing the guests' I/O through the agents' exports; the
notifications go through oslo.messaging (its in-memory ``test`` driver).

Stand-ins: as in test_live_migration.py, libvirt/QEMU is Nova's fake
libvirt, os-brick's iSCSI connector's ``connect_volume`` (no iSCSI
initiator in this kernel) answers with the calling host's disk of the
volume, Cinder is ``CinderFixture`` with connection_info from the real
``cinder_ext.policy``.  Authentication: Nova's ``OSAPIFixture`` stubs
keystone (the API trusts ``X-Auth-User``/``X-Roles`` headers) and serves
the API through wsgi-intercept, so novaclient gets a keystoneauth session
with keystoneauth's ``NoAuth`` plugin, the fixture's endpoint and admin
headers instead of a session from ``[nova]`` credentials
(``nova_ext.commands.evacuate.connect`` is replaced for that, and the
``sockets`` source is built directly because the .venv-nova install of
fcache predates its entry point; its stevedore loading is unit-tested).
Failures are injected where they happen in real life: a destination's
``pre_live_migration`` and Nova's compute API.
"""

import nova.monkey_patch  # noqa: F401  (Nova: first, before anything else)

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from unittest import mock

import fixtures
from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session
from oslo_config import cfg
import oslo_messaging
from oslo_messaging.notify import _impl_test
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional import integrated_helpers
from nova.tests.functional.libvirt import base

from cinder_ext import policy as cinder_policy
from fcache_testkit import harness
from nova_ext import agent as agent_mod
from nova_ext.balancer import decision
from nova_ext.balancer import nova as nova_mod
from nova_ext.balancer import opts as balancer_opts
from nova_ext.balancer import service
from nova_ext.balancer import sources
from nova_ext import cli
from nova_ext import notifications
from nova_ext import opts
from tests.nova_functional import luns
from tests.nova_functional import patience

CONF = cfg.CONF
HOSTS = ('h1', 'h2', 'h3')
MiB = 1 << 20
VOLUME_SIZE = 16 * MiB
PATTERN = 0x3c
WINDOW_S = 1


def _specs(strategy):
    return {'cacheable': '<is> True', 'fcache:strategy': strategy,
            'fcache:cache_size': '8M', 'fcache:write_policy': 'write_back',
            'fcache:rate_limit': '0'}


class GuestIO(object):
    """A guest reading ``nbytes`` of its disk over and over.

    It runs qemu-io against the export the server's BDM names (the one of
    the agent of the host it runs on); ``pause()`` stops it while Nova
    moves the server, as a real guest's I/O moves with QEMU.
    """

    def __init__(self, test, server_id, volume_id, nbytes):
        self.test = test
        self.server_id = server_id
        self.volume_id = volume_id
        self.nbytes = nbytes
        self.running = threading.Event()
        self.stopped = False
        self.errors = []
        self.rounds = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.running.set()
        self.thread.start()

    def pause(self):
        self.running.clear()
        time.sleep(0.3)         # let a qemu-io in flight finish

    def resume(self):
        self.running.set()

    def stop(self):
        self.stopped = True
        self.running.set()
        self.thread.join(30)

    def _run(self):
        while not self.stopped:
            self.running.wait()
            if self.stopped:
                return
            export = self.test.export_of(self.volume_id, self.server_id)
            out = subprocess.run(
                ['qemu-io', '-f', 'raw', export, '-c',
                 'read 0 %d' % self.nbytes], stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, timeout=60)
            if out.returncode or b'error' in out.stdout.lower():
                self.errors.append(out.stdout.decode(errors='replace'))
            self.rounds += 1
            time.sleep(0.2)


class GuestAwareNova(nova_mod.NovaView):
    """The balancer's real Nova view; the guests pause while they move."""

    def __init__(self, client, test):
        super().__init__(client)
        self.test = test

    def live_migrate(self, server_id, host):
        guest = self.test.guests.get(server_id)
        if guest:
            guest.pause()
        self.test.asked.append((server_id, host))
        super().live_migrate(server_id, host)


class _Base(patience.MigrationPatienceMixin, base.LibvirtMigrationMixin,
            base.ServersTestBase, integrated_helpers.InstanceHelperMixin):
    microversion = 'latest'
    ADMIN_API = True
    strategy = 'hybrid'

    def _setup_compute_service(self):
        self.flags(compute_driver='fcache.FcacheLibvirtDriver')

    def setUp(self):
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        super().setUp()
        opts.register_opts(CONF)
        self.workdir = self.useFixture(fixtures.TempDir()).path
        self.binary = harness.ensure_asan_agent(self.workdir)
        # The volumes' disks go last, once the agents let go of them.
        self.origins = {}
        self.addCleanup(self._stop_origins)
        self.agents = {}
        for host in HOSTS:
            agent = harness.Agent(self.binary, self.workdir, name=host,
                                  cache_size='8M', log_level='info',
                                  writeback_interval_ms=3600000,
                                  allocation_window=WINDOW_S,
                                  rws_predictor='last')
            agent.start()
            self.addCleanup(self._stop_agent, agent)
            self.agents[host] = agent
        self.originals = {}
        self.guests = {}
        self.asked = []
        luns.iscsi_connector(self, lambda host, props: self.origins[
            props['test_volume']].devices[host])
        for host in HOSTS:
            self.flags(agent_socket=self.agents[host].control_socket,
                       peer_agent_socket=None, migration_address=None,
                       link_mbps=1000, origin_mbps=200, group='fcache')
            self.start_compute(hostname=host, host_info=fakelibvirt.HostInfo(
                cpu_nodes=1, cpu_sockets=1, cpu_cores=4, cpu_threads=1))
        # The balancer's own configuration (not Nova's CONF).
        self.bconf = cfg.ConfigOpts()
        balancer_opts.register_opts(self.bconf)
        self.bconf([], project='fcache-test', default_config_files=[])
        self.bconf.set_override('agent_sockets', {
            h: a.control_socket for h, a in self.agents.items()},
            balancer_opts.GROUP_NAME)
        # Notifications through oslo.messaging's in-memory driver.
        _impl_test.reset()
        transport = oslo_messaging.get_notification_transport(
            self.bconf, url='fake:/')
        self.bnotifier = service.BalancerNotifier(oslo_messaging.Notifier(
            transport, publisher_id=service.PUBLISHER_ID, driver='test',
            topics=['notifications']))

    def _migrate_stub(self, *args, **kwargs):
        # The mixin's stub knows one self.src and one self.dest; here any
        # compute migrates to any other, several at a time: find both
        # ends from the call.
        params = kwargs.get('params') or next(
            a for a in args if isinstance(a, dict))
        uri = next(a for a in args if isinstance(a, str) and '://' in a)
        dest = self.computes[re.match(r'[^:]+://([^/:]+)', uri).group(1)]
        uuid = re.search(r'<uuid>([^<]+)</uuid>',
                         params['destination_xml']).group(1)
        dest.driver._host.get_connection().createXML(
            params['destination_xml'],
            'fake-createXML-doesnt-care-about-flags')
        for compute in self.computes.values():
            conn = compute.driver._host.get_connection()
            try:
                dom = conn.lookupByUUIDString(uuid)
            except fakelibvirt.libvirtError:
                continue
            if compute is not dest:
                dom.complete_job()
                return
        raise AssertionError('no source domain %s' % uuid)

    def _stop_agent(self, agent):
        for guest in self.guests.values():
            guest.stop()
        agent.stop()
        self.assertEqual([], agent.sanitizer_reports())

    def _stop_origins(self):
        for origin in self.origins.values():
            origin.cleanUp()

    # -- Nova through novaclient ------------------------------------------
    def novaclient(self):
        from novaclient import client as nova_client
        sess = ks_session.Session(
            auth=noauth.NoAuth(), additional_headers={
                'X-Auth-User': 'admin', 'X-User-Id': 'admin',
                'X-Auth-Project-Id': self.api.project_id,
                'X-Roles': 'reader,member,admin'})
        return nova_client.Client('2.60', session=sess,
                                  endpoint_override=self.api.base_url)

    # -- servers, volumes, guests -----------------------------------------
    def boot(self, name, host):
        """A server on ``host`` booted from its own cached volume."""
        vol = getattr(uuids, 'vol_' + name)
        path = os.path.join(self.workdir, '%s.img' % name)
        harness.make_origin_file(path, VOLUME_SIZE, seed=len(self.origins))
        with open(path, 'rb') as f:
            self.originals[vol] = f.read()
        origin = luns.SharedLun(path, HOSTS)
        origin.setUp()
        self.origins[vol] = origin
        data = {'target_lun': '1', 'cacheable': True, 'test_volume': vol}
        cinder_policy.add_to_connection_data(data, _specs(self.strategy))
        self.cinder.VOLUME_CONNECTION_INFO = dict(
            self.cinder.VOLUME_CONNECTION_INFO,
            **{vol: {'driver_volume_type': 'iscsi', 'data': data}})
        body = self._build_server(name=name, networks='none', host=host)
        body['imageRef'] = ''
        body['block_device_mapping_v2'] = [{
            'boot_index': 0, 'uuid': vol, 'source_type': 'volume',
            'destination_type': 'volume'}]
        server = self._wait_for_state_change(
            self.api.post_server({'server': body}), 'ACTIVE')
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        return server, vol

    def connection_data(self, vol, server_id):
        bdm = objects.BlockDeviceMapping.get_by_volume_and_instance(
            nova_context.get_admin_context(), vol, server_id)
        return jsonutils.loads(bdm.connection_info)['data']

    def export_of(self, vol, server_id):
        return self.connection_data(vol, server_id)['fcache_export']

    def guest_io(self, vol, server_id, *commands):
        args = ['qemu-io', '-f', 'raw', self.export_of(vol, server_id)]
        for command in commands:
            args += ['-c', command]
        out = subprocess.run(args, check=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=60).stdout
        self.assertNotIn(b'verification failed', out)
        self.assertNotIn(b'error', out.lower())

    def host_of(self, server_id):
        return self.api.get_server(server_id)['OS-EXT-SRV-ATTR:host']

    def client(self, host):
        return agent_mod.AgentClient(self.agents[host].control_socket)

    def volumes_on(self, host):
        return {v if isinstance(v, str) else v.get('volume_id', v.get('id'))
                for v in self.client(host).list_volumes()['volumes']}

    def check_after_delete(self, server, vol, written):
        """Delete the server: what the guest wrote reached the origin."""
        self._delete_server(server)
        with open(self.origins[vol].path, 'rb') as f:
            data = f.read()
        expected = (bytes([PATTERN]) * written +
                    self.originals[vol][written:])
        self.assertTrue(data == expected,
                        'the origin of %s differs from what its guest '
                        'wrote' % vol)

    def notifications(self, event_type):
        return [m for _, m, _, _ in _impl_test.NOTIFICATIONS
                if m['event_type'] == event_type]

    def _nova_versioned(self, event_type):
        # Nova's NotificationFixture (ServersTestBase's self.notifier).
        return [n for n in self.notifier.versioned_notifications
                if n['event_type'] == event_type]


class BalancerTest(_Base):
    """fcache-balancer's loop moves one VM off an overloaded host."""

    def setUp(self):
        super().setUp()
        # Loads: h1 runs two guests reading 4 MiB each per window (8 MiB
        # of demand on an 8 MiB cache: over 90 %), h2 one reading 2 MiB,
        # h3 one reading 1 MiB.
        self.servers = {}
        for name, host, nbytes in (('a1', 'h1', 4 * MiB),
                                   ('a2', 'h1', 4 * MiB),
                                   ('b1', 'h2', 2 * MiB),
                                   ('c1', 'h3', 1 * MiB)):
            server, vol = self.boot(name, host)
            # The guest writes its first MiB: dirty (write_back) until the
            # cache moves or the volume detaches.
            self.guest_io(vol, server['id'], 'write -P %d 0 %d'
                          % (PATTERN, MiB))
            self.servers[name] = (server, vol)
            guest = GuestIO(self, server['id'], vol, nbytes)
            self.guests[server['id']] = guest
            guest.start()
        self.nova = GuestAwareNova(self.novaclient(), self)
        self.source = sources.SocketsSource(self.bconf)

    def loop(self, **overrides):
        for key, value in overrides.items():
            self.bconf.set_override(key, value, balancer_opts.GROUP_NAME)
        return service.BalancerLoop(self.bconf, self.source, self.nova,
                                    self.bnotifier)

    def wait_for_demand(self, timeout=30):
        """Until every volume has a prediction and h1 is over 90 %."""
        deadline = time.monotonic() + timeout
        while True:
            loads, errors = self.source.loads()
            self.assertEqual({}, errors)
            ready = all(v.demand_bytes and loads[h].volumes
                        for h in HOSTS for v in loads[h].volumes.values())
            if ready and loads['h1'].demand_bytes > 0.9 * loads[
                    'h1'].capacity_bytes:
                return loads
            self.assertLess(time.monotonic(), deadline,
                            'the agents never predicted the demand: %r'
                            % loads)
            time.sleep(0.2)

    def observe_until(self, loop, predicate, limit=12):
        seen = []
        for _ in range(limit):
            obs = loop.observe()
            seen.append(obs)
            if predicate(obs):
                return seen
            time.sleep(WINDOW_S)
        self.fail('no observation of %d matched: %r' % (
            limit, [(o.window, o.decisions, o.errors) for o in seen]))

    def wait_settled(self, server_id, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            server = self.api.get_server(server_id)
            if server['OS-EXT-STS:task_state'] is None:
                return server
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)

    def test_overloaded_host_moves_one_vm_to_minimise_variance(self):
        loads = self.wait_for_demand()
        loop = self.loop()
        seen = self.observe_until(loop, lambda o: o.decisions)
        # Three windows over the threshold, not fewer.
        self.assertGreaterEqual(len(seen), 3)
        self.assertEqual([], [d for o in seen[:2] for d in o.decisions])
        dec, = seen[-1].decisions
        self.assertEqual('h1', dec.source)
        self.assertIn(dec.vm.id, {self.servers['a1'][0]['id'],
                                  self.servers['a2'][0]['id']})
        # h3 (1 MiB of 8) rather than h2 (2 MiB): the lower variance; the
        # alternative, recomputed from the hosts' loads as the balancer
        # saw them, is worse.
        self.assertEqual('h3', dec.destination)
        self.assertLess(dec.variance_after, dec.variance_before)
        cap = {h.name: h.capacity_bytes for h in seen[-1].hosts}
        load = {h: loads[h].demand_bytes for h in HOSTS}
        load['h1'] = dec.source_load
        load['h3'] = dec.destination_load
        d = dec.vm.demand_bytes
        alt = dict(load, h1=load['h1'] - d, h2=load['h2'] + d)
        util = [alt[h] / cap[h] for h in HOSTS]
        self.assertLess(dec.variance_after, decision.variance(util))
        sid = dec.vm.id
        self.assertEqual([(sid, 'h3')], self.asked)
        # The decision was notified.
        note, = self.notifications(service.DECISION)
        data = note['payload']['nova_object.data']
        self.assertEqual(('h1', 'h3', sid, False), (
            data['source'], data['destination'], data['vm'],
            data['dry_run']))
        self.assertEqual('fcache.balancer', note['publisher_id'])

        # Nova live-migrates it; the cache moves by the type's strategy.
        self._wait_for_migration_status({'id': sid}, ['completed'])
        self.wait_settled(sid)
        self.assertEqual('h3', self.host_of(sid))
        name = [n for n, (s, _) in self.servers.items() if s['id'] == sid][0]
        vol = self.servers[name][1]
        end = [n for n in self._nova_versioned('fcache.migration.end')
               if n['payload']['nova_object.data']['volume_id'] == vol]
        self.assertEqual(1, len(end))
        figures = end[0]['payload']['nova_object.data']
        self.assertEqual(self.strategy, figures['strategy'])
        self.assertGreater(figures['bytes_transferred'], 0)
        self.assertGreater(figures['blocks_transferred'], 0)
        self.assertIn(vol, self.volumes_on('h3'))
        self.assertNotIn(vol, self.volumes_on('h1'))
        # (What h3 caches of it later is its allocation's business: with
        # 1 s windows and the "last" predictor a window without the
        # guest's reads -- it is paused around the migration -- gives the
        # volume no share, so cached_blocks at a later moment is no measure
        # of what moved.)
        # The guest reads what it wrote, through h3's agent.
        self.guest_io(vol, sid, 'read -P %d 0 %d' % (PATTERN, MiB))
        self.guests[sid].resume()

        # The next observations see the move done and make no other.
        later = [loop.observe() for _ in range(4)]
        self.assertIn((sid, 'h3'), [c for o in later for c in o.completed])
        self.assertEqual([], [d for o in later for d in o.decisions])
        # The move was notified when Nova took it and once seen done.
        start, = self.notifications(service.MOVE_START)
        end, = self.notifications(service.MOVE_END)
        for note in (start, end):
            data = note['payload']['nova_object.data']
            self.assertEqual((sid, 'h1', 'h3'), (
                data['vm'], data['source'], data['destination']))
        self.assertGreater(
            end['payload']['nova_object.data']['duration_s'], 0)
        self.assertEqual([], self.notifications(service.ERROR))
        for guest in self.guests.values():
            guest.stop()
            self.assertEqual([], guest.errors)
            self.assertGreater(guest.rounds, 3)
        for name, (server, vol) in self.servers.items():
            self.check_after_delete(server, vol, MiB)

    def test_dry_run_only_logs_and_notifies(self):
        self.wait_for_demand()
        loop = self.loop(dry_run=True)
        seen = self.observe_until(loop, lambda o: o.decisions)
        dec, = seen[-1].decisions
        self.assertEqual([], self.asked)
        self.assertEqual([], seen[-1].started)
        note, = self.notifications(service.DECISION)
        self.assertTrue(note['payload']['nova_object.data']['dry_run'])
        self.assertEqual('h1', self.host_of(dec.vm.id))
        self.assertEqual([], self._nova_versioned('fcache.migration.start'))

    def test_failures_are_reported_and_the_balancer_goes_on(self):
        self.wait_for_demand()
        loop = self.loop(cooldown_windows=1)
        # 1. The destination breaks in pre_live_migration: Nova rolls the
        # migration back; the next observation reports it.
        with mock.patch.object(
                self.computes['h3'].driver, '_pre_live_migration_plug_vifs',
                side_effect=RuntimeError('injected destination failure')):
            seen = self.observe_until(loop, lambda o: o.decisions)
            first = seen[-1].decisions[0].vm.id
            self._wait_for_migration_status({'id': first},
                                            ['error', 'failed'])
            self.wait_settled(first)
        self.assertEqual('h1', self.host_of(first))
        self.guests[first].resume()
        obs = loop.observe()
        self.assertEqual([first], [sid for sid, _ in obs.failed])
        self.assertIn('live migration of server %s from h1 to h3 failed'
                      % first, obs.failed[0][1])
        error, = self.notifications(service.ERROR)
        self.assertEqual('migration',
                         error['payload']['nova_object.data']['phase'])
        # 2. Nova's API refuses the next move (409: the server is locked,
        # which an admin's request would override: injected).
        with mock.patch(
                'nova.compute.api.API.live_migrate',
                side_effect=nova_exception.InstanceIsLocked(
                    instance_uuid='injected-refusal')):
            seen = self.observe_until(loop, lambda o: o.decisions)
        obs = seen[-1]
        self.assertEqual([], obs.started)
        self.assertEqual(1, len(obs.errors))
        self.assertIn('HTTP 409', obs.errors[0])
        self.assertIn('injected-refusal is locked', obs.errors[0])
        self.assertIn('the balancer goes on', obs.errors[0])
        api_errors = [n for n in self.notifications(service.ERROR)
                      if n['payload']['nova_object.data']['phase'] == 'api']
        self.assertEqual(1, len(api_errors))
        refused = obs.decisions[0].vm.id
        self.guests[refused].resume()
        # 3. Nothing injected any more: the balancer still moves a VM.
        seen = self.observe_until(loop, lambda o: o.started)
        moved = seen[-1].started[0]
        self._wait_for_migration_status({'id': moved}, ['completed'])
        self.wait_settled(moved)
        self.assertEqual('h3', self.host_of(moved))


class EvacuateTest(_Base):
    """``fcache evacuate h1`` empties h1, caches warm, data intact."""

    strategy = 'auto'

    def test_evacuate_empties_the_host(self):
        # h1: a hot guest (wrote 1 MiB, read 4), a warm one (read 1 MiB)
        # and a cold one (nothing); h2 already runs a guest.
        vms = {}
        for name, host, commands, written in (
                ('hot', 'h1', ['write -P %d 0 %d' % (PATTERN, MiB),
                               'read 0 %d' % (4 * MiB)], MiB),
                ('warm', 'h1', ['read 0 %d' % MiB], 0),
                ('cold', 'h1', [], 0),
                ('other', 'h2', ['read 0 %d' % (2 * MiB)], 0)):
            server, vol = self.boot(name, host)
            if commands:
                self.guest_io(vol, server['id'], *commands)
            vms[name] = (server, vol, written)
        conf_path = os.path.join(self.workdir, 'fcache-balancer.conf')
        with open(conf_path, 'w') as f:
            f.write('[fcache_balancer]\nagent_sockets = %s\n'
                    'poll_interval = 0.2\nmigration_timeout = 120\n'
                    'link_mbps = 1000\norigin_mbps = 200\n' % ','.join(
                        '%s:%s' % (h, a.control_socket)
                        for h, a in sorted(self.agents.items())))

        def connect(conf, credentials=None):
            # Stand-in for the [nova] credentials only (see the module
            # docstring): the real novaclient against Nova's API.
            return (nova_mod.NovaView(self.novaclient()),
                    sources.SocketsSource(conf))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.commands.evacuate.connect', connect))

        status, out, _ = self.run_cli(['evacuate', 'h1', '--dry-run',
                                       '--json', '--config-file', conf_path])
        self.assertEqual(0, status)
        planned = json.loads(out)
        self.assertEqual({'planned'}, {s['state'] for s in planned['steps']})
        self.assertEqual(3, len(planned['steps']))
        for name in ('hot', 'warm', 'cold'):
            self.assertEqual('h1', self.host_of(vms[name][0]['id']))

        # The dry run notified nothing; the evacuation notifies through
        # the test driver.
        self.assertEqual([], _impl_test.NOTIFICATIONS)
        transport = oslo_messaging.get_notification_transport(
            self.bconf, url='fake:/')
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.commands.evacuate.make_notifier',
            lambda conf: notifications.EvacuationNotifier(
                oslo_messaging.Notifier(
                    transport, publisher_id='fcache.evacuate',
                    driver='test', topics=['notifications']))))
        status, out, err = self.run_cli(
            ['evacuate', 'h1', '--json', '--max-concurrent', '2',
             '--config-file', conf_path])
        self.assertEqual(0, status, err)
        result = json.loads(out)
        start, = self.notifications('fcache.evacuation.start')
        self.assertEqual(
            sorted(s['vm'] for s in result['steps']),
            sorted(start['payload']['nova_object.data']['vms']))
        steps = [n['payload']['nova_object.data']
                 for n in self.notifications('fcache.evacuation.step')]
        self.assertEqual({('done', s['vm'], s['destination'])
                          for s in result['steps']},
                         {(s['state'], s['vm'], s['destination'])
                          for s in steps})
        end, = self.notifications('fcache.evacuation.end')
        summary = end['payload']['nova_object.data']
        self.assertEqual((3, 0), (summary['done'], summary['failed']))
        self.assertEqual('INFO', end['priority'])
        self.assertEqual((3, 0), (result['done'], result['failed']))
        # Progress: JSON lines on stderr, one per start and per end.
        events = [json.loads(line) for line in err.splitlines()]
        self.assertEqual(6, len(events))
        self.assertEqual({'start': 3, 'done': 3}, {
            e: sum(1 for x in events if x['event'] == e)
            for e in ('start', 'done')})
        self.assertLessEqual(max(e['running'] for e in events), 2)
        steps = {s['vm']: s for s in result['steps']}
        by_vol = {}
        for name in ('hot', 'warm', 'cold'):
            server, vol, written = vms[name]
            step = steps[server['id']]
            self.assertEqual('done', step['state'])
            host = self.host_of(server['id'])
            self.assertEqual(step['destination'], host)
            self.assertNotEqual('h1', host)
            self.assertIn(vol, self.volumes_on(host))
            by_vol[vol] = step['volumes'][0]['strategy']
        # The plan: the hot cache is copied (it fits in the downtime
        # budget: firepan), the cold one moves nothing.
        self.assertEqual('firepan', by_vol[vms['hot'][1]])
        self.assertEqual('none', by_vol[vms['cold'][1]])
        # What ran is what was planned (the computes' [fcache] link and
        # origin figures are the plan's; the type's strategy is auto).
        ran = {n['payload']['nova_object.data']['volume_id']:
               n['payload']['nova_object.data']['strategy']
               for n in self._nova_versioned('fcache.migration.end')}
        self.assertEqual(by_vol, ran)
        self.assertEqual(set(), self.volumes_on('h1'))
        self.assertEqual(0, self.client('h1').status()['used_bytes'])
        # The hot guest's cache arrived warm and its data is intact.
        hot, hot_vol, _ = vms['hot']
        dest = steps[hot['id']]['destination']
        self.assertGreaterEqual(
            self.agents[dest].show(hot_vol)['cached_blocks'] *
            self.agents[dest].show(hot_vol)['block_size'], 4 * MiB)
        for name, (server, vol, written) in vms.items():
            if written:
                self.guest_io(vol, server['id'],
                              'read -P %d 0 %d' % (PATTERN, written))
            self.check_after_delete(server, vol, written)

    def test_a_refused_migration_is_reported(self):
        server, vol = self.boot('only', 'h1')
        conf_path = os.path.join(self.workdir, 'fcache-balancer.conf')
        with open(conf_path, 'w') as f:
            f.write('[fcache_balancer]\nagent_sockets = %s\n'
                    'poll_interval = 0.2\n' % ','.join(
                        '%s:%s' % (h, a.control_socket)
                        for h, a in sorted(self.agents.items())))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.commands.evacuate.connect',
            lambda conf, credentials=None: (
                nova_mod.NovaView(self.novaclient()),
                sources.SocketsSource(conf))))
        with mock.patch.object(
                self.computes['h2'].driver, '_pre_live_migration_plug_vifs',
                side_effect=RuntimeError('injected destination failure')), \
                mock.patch.object(
                    self.computes['h3'].driver,
                    '_pre_live_migration_plug_vifs',
                    side_effect=RuntimeError('injected destination failure')):
            status, out, err = self.run_cli(
                ['evacuate', 'h1', '--config-file', conf_path])
        self.assertEqual(1, status)
        self.assertIn('failed', out)
        self.assertIn('did not happen, the server is still on h1', out)
        self.assertEqual('h1', self.host_of(server['id']))
        # The guest's disk still works on h1.
        self.guest_io(vol, server['id'], 'read 0 %d' % MiB)

    def run_cli(self, argv):
        out, err = io.StringIO(), io.StringIO()
        with mock.patch('sys.stdout', out), mock.patch('sys.stderr', err):
            status = cli.main(argv)
        return status, out.getvalue(), err.getvalue()
