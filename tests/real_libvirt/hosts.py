# SPDX-License-Identifier: Apache-2.0
"""Two libvirt 9.0 daemons as two compute hosts on one machine.

Each host is a network namespace (``ip netns``; a veth pair joins them,
10.77.<n>.1 and .2) and a mount namespace in which the host's own
directories are mounted over /etc/libvirt, /var/lib/libvirt,
/var/log/libvirt, /var/cache/libvirt and a tmpfs over /run/libvirt: its
own configuration, domains, logs and runtime state, its own host UUID.
Each listens on TCP on its veth address (peer-to-peer migration, as
Nova's ``live_migration_uri`` = ``qemu+tcp://%s/system``) and on a unix
socket in its directory, which the test (in the root namespaces) uses.

Debian's defaults otherwise: QEMU runs as libvirt-qemu:libvirt-qemu with
dynamic ownership and its own mount namespace.  Two settings differ, each
for a reason of this machine, not of fcache: ``stdio_handler = "file"``
(no virtlogd runs here: QEMU's stdout, where qemu-io prints, goes straight
to ``<log>/qemu/<domain>.log``) and ``cgroup_controllers = []`` (no
systemd or cgroup delegation in this sandbox).
"""

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import libvirt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), 'tools'))
from cloudbox import computes  # noqa: E402

# libvirt's flags as nova/virt/libvirt/driver.py sets them by default
# (_prepare_migration_flags: live, peer-to-peer, undefine the source,
# persist on the destination; no tunnelling, post-copy or auto-converge).
NOVA_LIVE_MIGRATION_FLAGS = (libvirt.VIR_MIGRATE_LIVE |
                             libvirt.VIR_MIGRATE_PEER2PEER |
                             libvirt.VIR_MIGRATE_UNDEFINE_SOURCE |
                             libvirt.VIR_MIGRATE_PERSIST_DEST)

# The daemon's configuration is the cloud in a box's (tools/cloudbox): the
# same two departures from Debian's, for the same reasons.
LIBVIRTD_CONF = computes.LIBVIRTD_CONF
QEMU_CONF = computes.QEMU_CONF
MOUNTS = computes.MOUNTS


def _run(*argv):
    subprocess.run(argv, check=True, capture_output=True)


class Host(object):
    """One libvirtd in its own network and mount namespaces."""

    def __init__(self, directory, name, addr):
        self.name = name
        self.addr = addr
        self.dir = os.path.join(directory, name)
        self.run_dir = os.path.join(self.dir, 'run')
        self.log_dir = os.path.join(self.dir, 'log')
        self.uuid = str(uuid.uuid4())
        self.proc = None
        self._conn = None

    @property
    def uri(self):
        """For the test, from the root namespaces."""
        return 'qemu+unix:///system?socket=%s/libvirt-sock' % self.run_dir

    @property
    def migration_uri(self):
        """What a peer's daemon connects to (Nova's live_migration_uri)."""
        return 'qemu+tcp://%s/system' % self.addr

    def start(self, timeout=30):
        sub = {}
        for m in MOUNTS:
            sub[m] = os.path.join(self.dir, m.strip('/').replace('/', '_'))
            os.makedirs(sub[m], exist_ok=True)
        # The package's own configuration is the starting point.
        shutil.copytree('/etc/libvirt', sub['/etc/libvirt'],
                        dirs_exist_ok=True)
        os.makedirs(self.run_dir, exist_ok=True)
        os.makedirs(os.path.join(self.log_dir), exist_ok=True)
        with open(os.path.join(sub['/etc/libvirt'], 'libvirtd.conf'),
                  'w') as f:
            f.write(LIBVIRTD_CONF.format(addr=self.addr, run=self.run_dir,
                                         uuid=self.uuid, log=self.log_dir))
        with open(os.path.join(sub['/etc/libvirt'], 'qemu.conf'), 'w') as f:
            f.write(QEMU_CONF)
        script = ['set -e', 'mkdir -p /run/libvirt',
                  'mount -t tmpfs tmpfs /run/libvirt']
        script += ['mount --bind %s %s' % (sub[m], m) for m in MOUNTS]
        script.append('exec libvirtd --listen -f /etc/libvirt/libvirtd.conf '
                      '-p %s/libvirtd.pid' % self.run_dir)
        with open(os.path.join(self.log_dir, 'daemon.out'), 'ab') as out:
            self.proc = subprocess.Popen(
                ['ip', 'netns', 'exec', self.name, 'unshare', '-m',
                 '--propagation', 'private', 'sh', '-c', '\n'.join(script)],
                stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        sock = os.path.join(self.run_dir, 'libvirt-sock')
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError('libvirtd of %s exited (%s): %s' % (
                    self.name, self.proc.returncode, self.log_tail()))
            if os.path.exists(sock):
                try:
                    self.conn()
                    return self
                except libvirt.libvirtError:
                    pass
            time.sleep(0.1)
        raise AssertionError('libvirtd of %s did not answer within %d s: %s'
                             % (self.name, timeout, self.log_tail()))

    def conn(self):
        if self._conn is None:
            self._conn = libvirt.open(self.uri)
        return self._conn

    def domain_log(self, name):
        path = os.path.join(self.dir, 'var_log_libvirt', 'qemu',
                            name + '.log')
        try:
            with open(path, errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    def log_tail(self, n=3000):
        text = ''
        for f in ('daemon.out', 'libvirtd.log'):
            try:
                with open(os.path.join(self.log_dir, f),
                          errors='replace') as fh:
                    text += fh.read()[-n:]
            except OSError:
                pass
        return text

    def clean_domains(self):
        if self._conn is None:
            return
        for dom in self._conn.listAllDomains():
            try:
                if dom.isActive():
                    dom.destroy()
                if dom.isPersistent():
                    dom.undefine()
            except libvirt.libvirtError:
                pass

    def stop(self):
        try:
            self.clean_domains()
        finally:
            if self._conn is not None:
                try:
                    self._conn.close()
                except libvirt.libvirtError:
                    pass
                self._conn = None
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)


class TwoHosts(object):
    """A veth pair between two fresh network namespaces, a daemon in each."""

    def __init__(self, directory, net=77):
        tag = '%d' % os.getpid()
        self.ns = ('fcsrc%s' % tag, 'fcdst%s' % tag)
        self.addrs = ('10.%d.0.1' % net, '10.%d.0.2' % net)
        self.hosts = [Host(directory, ns, addr)
                      for ns, addr in zip(self.ns, self.addrs)]

    def up(self):
        a, b = self.ns
        va, vb = 'v%s' % a[-8:], 'v%s' % b[-8:]
        for ns in self.ns:
            _run('ip', 'netns', 'add', ns)
            _run('ip', '-n', ns, 'link', 'set', 'lo', 'up')
        _run('ip', 'link', 'add', va, 'type', 'veth', 'peer', 'name', vb)
        for ns, dev, addr in ((a, va, self.addrs[0]), (b, vb, self.addrs[1])):
            _run('ip', 'link', 'set', dev, 'netns', ns)
            _run('ip', '-n', ns, 'addr', 'add', addr + '/24', 'dev', dev)
            _run('ip', '-n', ns, 'link', 'set', dev, 'up')
        for h in self.hosts:
            h.start()
        return self

    def down(self):
        for h in self.hosts:
            try:
                h.stop()
            except Exception:     # teardown goes on; the test reported
                pass
        for ns in self.ns:
            subprocess.run(['ip', 'netns', 'delete', ns], capture_output=True)
