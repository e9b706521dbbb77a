# SPDX-License-Identifier: Apache-2.0
"""A real single-node Ceph cluster for the functional tests.

:class:`CephBox` drives ``tools/ceph-box.sh``: one mon and one bluestore
OSD (its block device a sparse file in the box's directory), on loopback,
cephx on, the pool ``volumes`` and the client ``client.cinder`` (caps
``profile rbd`` on that pool).  It starts in about 4 s.

Images are written with librbd (Debian's python3-rbd) and read back with
``rbd export``: two clients, so that a test's oracle does not read through
the library that wrote.  Every client operation is bounded: librados'
mount and operation timeouts, subprocess timeouts.

The fixture ``ceph_box`` starts one box per test module in a short
directory under /tmp and stops it at the end; the directory (the daemons'
logs) is kept if a test of the module failed or FCACHE_KEEP_TMP is set.
"""

import contextlib
import json
import os
import shutil
import subprocess
import tempfile

import pytest
import rados
import rbd

from fcache_testkit import harness

BOX = os.path.join(harness.REPO, 'tools', 'ceph-box.sh')


class CephBox(object):
    """One cluster in ``directory`` (which ``start()`` creates)."""

    pool = 'volumes'

    def __init__(self, directory, size='4G'):
        self.dir = directory
        self.size = size
        self.conf = os.path.join(directory, 'ceph.conf')
        self.admin_keyring = os.path.join(directory,
                                          'ceph.client.admin.keyring')
        self.cinder_keyring = os.path.join(directory,
                                           'ceph.client.cinder.keyring')
        self.mon_host = None

    # -- the daemons --------------------------------------------------------

    def _box(self, *args, timeout=90):
        try:
            res = subprocess.run([BOX] + list(args), capture_output=True,
                                 text=True, timeout=timeout,
                                 stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise AssertionError('ceph-box.sh %s took over %d s' % (
                ' '.join(args), timeout))
        if res.returncode != 0:
            raise AssertionError('ceph-box.sh %s failed (%d):\n%s%s' % (
                ' '.join(args), res.returncode, res.stdout, res.stderr))
        return res.stdout

    def start(self):
        self._box('start', self.dir, self.size)
        env = dict(line.split('=', 1)
                   for line in self._box('env', self.dir).splitlines())
        self.mon_host = env['CEPH_MON_HOST']
        return self

    def stop(self):
        self._box('stop', self.dir)

    def kill_osd(self):
        """SIGKILL the OSD (the mon marks it down, as its peers would)."""
        self._box('kill-osd', self.dir)

    def start_osd(self):
        """Start the OSD on its store again; returns once it serves I/O."""
        self._box('start-osd', self.dir)

    # -- clients ------------------------------------------------------------

    def client_conf(self, user='cinder', keyring=None, timeout=10):
        """Options a client of this box needs: no ceph.conf, no /etc/ceph."""
        return {
            'mon_host': self.mon_host,
            'keyring': keyring or os.path.join(
                self.dir, 'ceph.client.%s.keyring' % user),
            'client_mount_timeout': str(timeout),
            'rados_mon_op_timeout': str(timeout),
            'rados_osd_op_timeout': str(timeout),
            'log_to_stderr': 'false',
            'err_to_stderr': 'false',
        }

    @contextlib.contextmanager
    def client(self, user='cinder', keyring=None, timeout=10, **conf):
        """A connected ``rados.Rados`` for ``user``, shut down on exit."""
        options = self.client_conf(user, keyring, timeout)
        options.update(conf)
        # An empty ceph.conf: these options are all a client needs (no
        # /etc/ceph, no $CEPH_CONF).
        cluster = rados.Rados(rados_id=user, conffile=os.devnull,
                              conf=options)
        try:
            cluster.connect(timeout=timeout)
            yield cluster
        finally:
            cluster.shutdown()

    @contextlib.contextmanager
    def ioctx(self, user='cinder', timeout=10, pool=None):
        with self.client(user, timeout=timeout) as cluster:
            io = cluster.open_ioctx(pool or self.pool)
            try:
                yield io
            finally:
                io.close()

    def rbd(self, *args, user='cinder', timeout=30, **kwargs):
        """Run the rbd command as ``user``; a CompletedProcess (bytes)."""
        cmd = ['rbd', '--conf', self.conf, '--id', user,
               '--rados-osd-op-timeout', str(timeout),
               '--rados-mon-op-timeout', str(timeout),
               '--client-mount-timeout', str(timeout)] + list(args)
        return subprocess.run(cmd, capture_output=True, timeout=timeout + 10,
                              stdin=subprocess.DEVNULL, **kwargs)

    def _rbd_ok(self, *args, **kwargs):
        res = self.rbd(*args, **kwargs)
        if res.returncode != 0:
            raise AssertionError('rbd %s failed (%d): %s' % (
                ' '.join(args), res.returncode,
                res.stderr.decode(errors='replace')[-2000:]))
        return res.stdout

    # -- images -------------------------------------------------------------

    def create_image(self, name, size_bytes, **kwargs):
        """Create ``name`` in the pool with librbd's default features."""
        with self.ioctx() as io:
            rbd.RBD().create(io, name, size_bytes, **kwargs)

    def remove_image(self, name):
        with self.ioctx() as io:
            rbd.RBD().remove(io, name)

    def list_images(self):
        with self.ioctx() as io:
            return rbd.RBD().list(io)

    def write_image(self, name, data, offset=0):
        """Write ``data`` at ``offset`` with librbd and flush it."""
        with self.ioctx() as io:
            with rbd.Image(io, name) as image:
                written = image.write(bytes(data), offset)
                image.flush()
        assert written == len(data), (written, len(data))

    def image_bytes(self, name, timeout=30):
        """The whole image, read by ``rbd export`` (not by librbd here)."""
        return self._rbd_ok('export', '--no-progress',
                            '%s/%s' % (self.pool, name), '-',
                            timeout=timeout)

    def image_info(self, name):
        """``rbd info --format json`` of ``name``, as a dict."""
        return json.loads(self._rbd_ok('info', '--format', 'json',
                                       '%s/%s' % (self.pool, name)))


@pytest.fixture(scope='module')
def ceph_box(request):
    directory = tempfile.mkdtemp(prefix='ceph-', dir='/tmp')
    box = CephBox(directory)
    failed_before = request.session.testsfailed
    keep = True                 # unless every test of the module passed
    try:
        box.start()
        yield box
        keep = (request.session.testsfailed > failed_before or
                bool(os.environ.get('FCACHE_KEEP_TMP')))
    finally:
        box.stop()
        if keep:
            print('ceph box files (logs in log/) kept in %s' % directory)
        else:
            shutil.rmtree(directory, ignore_errors=True)
