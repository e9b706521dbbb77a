# SPDX-License-Identifier: Apache-2.0
"""Ceph RBD volumes cached through Nova, against a real Ceph cluster.

Nova 34 in process as in test_live_migration.py (its API, conductor,
scheduler, two nova-compute services ``src`` and ``dest`` loading our
driver, ``CinderFixture``), two real fcache agents (the ASan build), and a
real single-node Ceph cluster (``tools/ceph-box.sh``: a mon and an OSD on
loopback, cephx on), one per test class.  Cinder's connection_info for the
volume is the RBD driver's (``driver_volume_type`` ``rbd``: the image, the
monitor, the cephx user and the libvirt secret holding its key), with the
type's ``fcache:`` policy from the real ``cinder_ext.policy`` bridge.

Nothing stands in for what the agent accepts: Nova's
``LibvirtNetVolumeDriver`` connects nothing for an RBD disk; our driver
reads the cephx key from the host's (fake) libvirt secret, writes the
keyring into ``[fcache] rbd_keyring_dir`` and hands the agent an ``rbd:``
origin, which the agent opens with librbd.  The guest's I/O is qemu-io on
the agent's export; the image is read back with ``rbd export``, another
client than the agent's.

Stand-ins: libvirt is Nova's fake, whose connection lacks
``secretLookupByUUIDString`` (added over its own secrets, as in
tests/nova_unit); both computes run on one oslo.config object, so each
driver is given its own host's ``rbd_keyring_dir`` (and each agent has
that directory in its ``origin_rbd_dirs``), as each host's nova.conf
would.

.venv-nova has no python-rados: the cluster is driven through
``tools/ceph-box.sh`` and the ``rbd`` command.
"""

import nova.monkey_patch  # noqa: F401  (Nova: first, before anything else)

import base64
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import fixtures
from oslo_config import cfg
from oslo_utils import uuidutils

from nova.tests.fixtures import libvirt as fakelibvirt

from cinder_ext import policy as cinder_policy
from fcache_testkit import harness
from nova_ext import opts
from nova_ext.virt import driver as fcache_driver
from nova_ext.virt import rbd as rbd_mod
from tests.nova_functional import test_live_migration as lm

CONF = cfg.CONF

BOX = os.path.join(harness.REPO, 'tools', 'ceph-box.sh')
VOLUME = lm.VOLUME
MiB = lm.MiB
VOLUME_SIZE = 16 * MiB
SECRET = '5d1c7e2a-0c4f-4a57-9a43-3f0b9b8e2c61'
# What the guest writes: on the source, then on the destination.
FIRST, SECOND = 0x5a, 0xa5
FIRST_OFF, FIRST_LEN = 0, 1 * MiB
SECOND_OFF, SECOND_LEN = 3 * MiB, 512 << 10


class CephBox(object):
    """tools/ceph-box.sh in ``directory``, and ``rbd`` as client.cinder."""

    pool = 'volumes'

    def __init__(self, directory):
        self.dir = directory
        self.conf = os.path.join(directory, 'ceph.conf')
        self.cinder_keyring = os.path.join(directory,
                                           'ceph.client.cinder.keyring')
        self.mon_host = None

    def _box(self, *args, timeout=90):
        res = subprocess.run([BOX] + list(args), capture_output=True,
                             text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise AssertionError('ceph-box.sh %s failed (%d):\n%s%s' % (
                ' '.join(args), res.returncode, res.stdout, res.stderr))
        return res.stdout

    def start(self):
        self._box('start', self.dir)
        env = dict(line.split('=', 1)
                   for line in self._box('env', self.dir).splitlines())
        self.mon_host = env['CEPH_MON_HOST']
        return self

    def stop(self):
        self._box('stop', self.dir)

    @property
    def mon_port(self):
        return self.mon_host.rpartition(':')[2]

    def cinder_key(self):
        """client.cinder's key as its keyring has it (base64)."""
        with open(self.cinder_keyring) as f:
            return re.search(r'^\s*key\s*=\s*(\S+)\s*$', f.read(),
                             re.M).group(1)

    def rbd(self, *args, timeout=30):
        cmd = ['rbd', '--conf', self.conf, '--id', 'cinder',
               '--rados-osd-op-timeout', str(timeout),
               '--rados-mon-op-timeout', str(timeout),
               '--client-mount-timeout', str(timeout)] + list(args)
        res = subprocess.run(cmd, capture_output=True, timeout=timeout + 10,
                             stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise AssertionError('rbd %s failed (%d): %s' % (
                ' '.join(args), res.returncode,
                res.stderr.decode(errors='replace')[-2000:]))
        return res.stdout

    def import_image(self, name, path):
        self.rbd('import', '--no-progress', path,
                 '%s/%s' % (self.pool, name))

    def image_bytes(self, name):
        """The whole image, read by ``rbd export`` (not by the agent)."""
        return self.rbd('export', '--no-progress',
                        '%s/%s' % (self.pool, name), '-')


class _HostConf(object):
    """``[fcache]`` as one host's nova.conf has it."""

    def __init__(self, conf, **own):
        self._conf = conf
        self.__dict__.update(own)

    def __getattr__(self, name):
        return getattr(self._conf, name)


def _lookup_secret(conn, uuid):
    """virConnect.secretLookupByUUIDString over the fake's secrets."""
    try:
        return conn._secrets[uuid]
    except KeyError:
        raise fakelibvirt.make_libvirtError(
            fakelibvirt.libvirtError,
            "Secret not found: no secret with matching uuid '%s'" % uuid,
            error_code=fakelibvirt.VIR_ERR_NO_SECRET,
            error_domain=fakelibvirt.VIR_FROM_SECRET) from None


class RbdVolumeTest(lm._Base):
    """An RBD volume, write_back, hybrid: attach, I/O, migrate, detach."""

    specs = lm._specs('hybrid', write_policy='write_back')

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A short path: the daemons' unix sockets live in it.
        directory = tempfile.mkdtemp(prefix='ceph-', dir='/tmp')
        cls.box = CephBox(directory)

        def stop():
            try:
                cls.box.stop()
            finally:
                if os.environ.get('FCACHE_KEEP_TMP'):
                    print('ceph box files kept in %s' % directory)
                else:
                    shutil.rmtree(directory, ignore_errors=True)
        cls.addClassCleanup(stop)
        cls.box.start()

    def setUp(self):
        # lm._Base.setUp without its storage (nbdkit) and its iSCSI
        # connector stand-in: an RBD disk connects nothing.
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        super(lm._Base, self).setUp()
        opts.register_opts(CONF)
        # fakelibvirt sends no device-removed event for a network disk it
        # does not render: do not wait 20 s for it on detach.
        self.flags(device_detach_timeout=1, group='libvirt')
        self.workdir = self.useFixture(fixtures.TempDir()).path
        self._start_image_and_agents()

        # Cinder's RBD driver's connection_info (initialize_connection).
        data = {'name': '%s/%s' % (self.box.pool, self.image),
                'hosts': ['127.0.0.1'], 'ports': [self.box.mon_port],
                'cluster_name': 'ceph', 'auth_enabled': True,
                'auth_username': 'cinder', 'secret_type': 'ceph',
                'secret_uuid': SECRET, 'volume_id': VOLUME,
                'discard': True, 'cacheable': True}
        cinder_policy.add_to_connection_data(data, self.specs)
        self.cinder.VOLUME_CONNECTION_INFO = dict(
            self.cinder.VOLUME_CONNECTION_INFO,
            **{VOLUME: {'driver_volume_type': 'rbd', 'data': data}})

        # Each host's rbd_keyring_dir, as its own nova.conf would say.
        self.useFixture(fixtures.MonkeyPatch(
            'nova_ext.virt.driver.FcacheLibvirtDriver._fcache_conf',
            property(lambda drv: _HostConf(
                CONF[opts.GROUP_NAME],
                rbd_keyring_dir=self.keyring_dirs[drv._fcache_hostname]))))
        # libvirt's virSecretLookupByUUIDString, which the fake lacks.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Connection.'
            'secretLookupByUUIDString', _lookup_secret))

        for host in ('src', 'dest'):
            self.flags(agent_socket=self.agents[host].control_socket,
                       group='fcache', **self._fcache_flags(host))
            self.start_compute(hostname=host, host_info=fakelibvirt.HostInfo(
                cpu_nodes=1, cpu_sockets=1, cpu_cores=4, cpu_threads=1))
            # The operator's `virsh secret-define` and `secret-set-value
            # --base64 KEY` on each host: the value is the key's bytes.
            secret = self.computes[host].driver._host.get_connection(
            ).secretDefineXML(
                "<secret ephemeral='no' private='no'><uuid>%s</uuid>"
                "<usage type='ceph'><name>client.cinder secret</name>"
                "</usage></secret>" % SECRET)
            secret.setValue(base64.b64decode(self.box.cinder_key()))
        self.src = self.computes['src']
        self.dest = self.computes['dest']
        self.assertIsInstance(self.src.driver,
                              fcache_driver.FcacheLibvirtDriver)
        self.migrations = []

    def _start_image_and_agents(self):
        binary = harness.ensure_asan_agent(self.workdir)
        path = os.path.join(self.workdir, 'content.img')
        self.original = bytes(harness.make_origin_file(path, VOLUME_SIZE,
                                                       seed=7))
        self.image = 'volume-%s' % uuidutils.generate_uuid()
        self.box.import_image(self.image, path)
        self.agents = {}
        self.keyring_dirs = {}
        for host in ('src', 'dest'):
            keys = os.path.join(self.workdir, host, 'ceph')
            self.keyring_dirs[host] = keys
            # The source keeps the guest's writes dirty until they move
            # (or are detached); the destination writes back at once, so
            # that its writes reach the image while it has the volume.
            agent = harness.Agent(
                binary, self.workdir, name=host, cache_size='64M',
                log_level='info', origin_rbd_dirs=keys + '/',
                writeback_interval_ms=3600000 if host == 'src' else 100)
            agent.start()
            self.addCleanup(self._stop_agent, agent)
            self.agents[host] = agent

    # -- helpers -----------------------------------------------------------

    def _keyring(self, host):
        return os.path.join(self.keyring_dirs[host],
                            rbd_mod.keyring_name(VOLUME))

    def _assert_keyring(self, host):
        path = self._keyring(host)
        st = os.stat(path)
        self.assertEqual(0o600, stat.S_IMODE(st.st_mode), oct(st.st_mode))
        with open(path) as f:
            self.assertEqual('[client.cinder]\n\tkey = %s\n' %
                             self.box.cinder_key(), f.read())

    def _expected_origin(self, host):
        return ('rbd:%s/%s:id=cinder:keyring=%s:mon_host=%s' % (
            self.box.pool, self.image, self._keyring(host),
            self.box.mon_host.replace(':', '\\:')))

    def _expected_image(self, second=False):
        want = bytearray(self.original)
        want[FIRST_OFF:FIRST_OFF + FIRST_LEN] = bytes([FIRST]) * FIRST_LEN
        if second:
            want[SECOND_OFF:SECOND_OFF + SECOND_LEN] = \
                bytes([SECOND]) * SECOND_LEN
        return bytes(want)

    def _assert_image(self, want, what):
        got = self.box.image_bytes(self.image)
        self.assertEqual(len(want), len(got))
        if got != want:
            first = next(i for i in range(len(want)) if got[i] != want[i])
            self.fail('%s: the image differs from what the guest wrote, '
                      'first at byte %d' % (what, first))

    def _detach(self, host):
        # One CONF for both computes: the driver detach is made only where
        # CONF.host is the instance's host.
        self.flags(host=host)
        self.api.delete_server_volume(self.server['id'], VOLUME)
        self._wait_for_volume_detach(self.server['id'], VOLUME)

    def _wait_clean(self, host, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            shown = self.agents[host].show(VOLUME)
            if not shown['dirty_blocks']:
                return shown
            self.assertLess(time.monotonic(), deadline,
                            '%s kept %d dirty blocks' % (
                                host, shown['dirty_blocks']))
            time.sleep(0.05)

    # -- scenarios ---------------------------------------------------------

    def _server_with_volume(self):
        body = self._build_server(networks='none', host='src')
        self.server = self._wait_for_state_change(
            self.api.post_server({'server': body}), 'ACTIVE')
        self._attach_volume(self.server, VOLUME)

    def test_attach_io_detach(self):
        self._server_with_volume()

        vol = self.agents['src'].show(VOLUME)
        self.assertEqual(self._expected_origin('src'), vol['origin'])
        self.assertEqual('write_back', vol['write_policy'])
        self._assert_keyring('src')
        data = self._connection_data()
        self.assertEqual(vol['export_uri'], data['fcache_export'])
        # The guest reads the image's data through the agent, and writes.
        self._guest_io(data['fcache_export'],
                       'read -v %d 4096' % (2 * MiB),
                       'write -P %d %d %d' % (FIRST, FIRST_OFF, FIRST_LEN),
                       'read -P %d %d %d' % (FIRST, FIRST_OFF, FIRST_LEN))
        self.assertGreater(self.agents['src'].show(VOLUME)['dirty_blocks'],
                           0)
        # write_back, no writeback yet: not in the image.
        self.assertEqual(self.original, self.box.image_bytes(self.image))

        self._detach('src')
        self.assertEqual([], self._client('src').list_volumes()['volumes'])
        self._assert_image(self._expected_image(), 'after detach')
        self.assertFalse(os.path.exists(self._keyring('src')))
        self.assertEqual([], os.listdir(self.keyring_dirs['src']))

    def test_live_migration_moves_the_volume_and_its_lock(self):
        self._server_with_volume()
        self.assertEqual(self._expected_origin('src'),
                         self.agents['src'].show(VOLUME)['origin'])
        self._guest_io(self._connection_data()['fcache_export'],
                       'write -P %d %d %d' % (FIRST, FIRST_OFF, FIRST_LEN),
                       'read %d %d' % (FIRST_LEN, 2 * MiB))
        before = self.agents['src'].show(VOLUME)
        self.assertEqual(FIRST_LEN // before['block_size'],
                         before['dirty_blocks'])

        self._live_migrate(self.server)
        server = self.api.get_server(self.server['id'])
        self.assertEqual('dest', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(self.migrations))
        end, = self._versioned('fcache.migration.end')
        self.assertEqual('hybrid',
                         end['payload']['nova_object.data']['strategy'])

        # The source let the volume, its lock and its keyring go.
        self.assertEqual([], self._client('src').list_volumes()['volumes'])
        self.assertFalse(os.path.exists(self._keyring('src')))
        self._assert_keyring('dest')
        vol = self.agents['dest'].show(VOLUME)
        self.assertEqual(self._expected_origin('dest'), vol['origin'])
        data = self._connection_data()
        self.assertEqual(vol['export_uri'], data['fcache_export'])

        # The guest on the destination: what it wrote on the source, and a
        # write.  The destination writes both back while it has the
        # volume, which needs the image's exclusive lock: the source gave
        # it up.
        self._guest_io(data['fcache_export'],
                       'read -P %d %d %d' % (FIRST, FIRST_OFF, FIRST_LEN),
                       'write -P %d %d %d' % (SECOND, SECOND_OFF,
                                              SECOND_LEN),
                       'read -P %d %d %d' % (SECOND, SECOND_OFF,
                                             SECOND_LEN))
        shown = self._wait_clean('dest')
        self.assertGreater(shown['origin_write_bytes'], 0, shown)
        self._assert_image(self._expected_image(second=True),
                           'attached on the destination')

        self._detach('dest')
        self.assertEqual([], self._client('dest').list_volumes()['volumes'])
        self._assert_image(self._expected_image(second=True),
                           'after detach')
        self.assertFalse(os.path.exists(self._keyring('dest')))
