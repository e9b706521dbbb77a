# SPDX-License-Identifier: Apache-2.0
"""End to end: a real QEMU live-migrates while its volume's cache moves.

Two ``qemu-system-x86_64`` (TCG), each with a virtio-blk disk on its
host's fcache export (``share-rw=on``, so ``qemu-io`` can write beside the
device).  The fcache migration runs phase by phase around QEMU's own:

1. ``prepare``: the destination agent attaches the volume, gated; its
   ``export_uri`` is what the destination QEMU opens;
2. the destination QEMU starts with ``-incoming`` and ``-S``;
3. ``start`` (``firepan``: the source VM is stopped first);
4. QMP ``migrate``, polled until ``completed``;
5. ``switchover``, then ``cont`` on the destination;
6. the source QEMU quits, ``finish``.

Patterns written on the source before (``qemu-io write -P``) read back on
the destination (``read -P`` says nothing on a match), new writes there
read back, and a libnbd read of the whole disk matches the oracle.
"""

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

MiB = mu.MiB
BS = mu.BS
VOLUME_SIZE = mu.VOLUME_SIZE
VOLUME_CACHE = mu.VOLUME_CACHE
QEMU = 'qemu-system-x86_64'
COMMON = ['-machine', 'q35,accel=tcg', '-nodefaults', '-display', 'none',
          '-m', '128']

# Given a geometry, virtio-blk does not read sector 0 at realize to guess
# one: see test_destination_qemu_starts_before_switchover.
GEOMETRY = ',cyls=64,heads=16,secs=63'
# (pattern byte, offset, length): written on the source before migrating.
PATTERNS = [(0xab, 0, MiB), (0xcd, 5 * MiB, 512 * 1024),
            (0x11, 17 * MiB + 4096, 64 * 1024), (0x5a, 30 * MiB, 2 * MiB)]
# Written on the destination after the switch.
NEW = [(0x77, 2 * MiB, 256 * 1024), (0x3c, 20 * MiB, MiB)]


class Qmp(object):
    """A minimal QMP client on a unix socket."""

    def __init__(self, path, timeout=30):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.buf = b''
        self.events = []
        # QEMU can write an event ahead of the greeting: a monitor enters
        # negotiation only when QEMU handles the new connection, and an
        # event broadcast before that (MIGRATION 'setup' as the incoming
        # migration starts) reaches the client first.  qemu-devel's
        # "[PATCH 3/4] qmp: Fix thread race" (Dec 2025) is about this
        # window; CI met it once in some forty runs.
        while True:
            greeting = self._read()
            if 'event' not in greeting:
                break
            self.events.append(greeting)
        assert 'QMP' in greeting, greeting
        self.cmd('qmp_capabilities')

    def _read(self):
        while b'\n' not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError('QMP connection closed')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\n', 1)
        return json.loads(line)

    def cmd(self, name, **args):
        msg = {'execute': name}
        if args:
            msg['arguments'] = args
        self.sock.sendall(json.dumps(msg).encode() + b'\n')
        while True:
            r = self._read()
            if 'event' in r:
                self.events.append(r)
                continue
            if 'error' in r:
                raise AssertionError('QMP %s failed: %s' % (name, r['error']))
            return r['return']

    def hmp(self, line):
        return self.cmd('human-monitor-command', **{'command-line': line})

    def qemu_io(self, node, command):
        return self.hmp('qemu-io %s "%s"' % (node, command))

    def close(self):
        self.sock.close()


class Qemu(object):
    """One qemu-system-x86_64 process with its disk on an NBD export."""

    def __init__(self, directory, name, export_uri, incoming=None,
                 geometry=True):
        self.name = name
        self.qmp_path = os.path.join(directory, '%s.qmp' % name)
        self.logfile = os.path.join(directory, '%s.qemu.log' % name)
        q = urllib.parse.urlparse(export_uri)
        sock = urllib.parse.parse_qs(q.query)['socket'][0]
        # The export opens only under the name its URI carries.
        export = q.path.lstrip('/')
        self.argv = [QEMU] + COMMON + [
            '-blockdev', 'driver=nbd,server.type=unix,server.path=%s,'
                         '%snode-name=n0' % (
                             sock, 'export=%s,' % export if export else ''),
            '-device', 'virtio-blk-pci,drive=n0,id=drive0,share-rw=on' +
            (GEOMETRY if geometry else ''),
            '-qmp', 'unix:%s,server=on,wait=off' % self.qmp_path]
        if incoming:
            self.argv += ['-incoming', incoming, '-S']
        self.proc = None
        self.qmp = None

    def start(self, timeout=30):
        with open(self.logfile, 'ab') as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError('%s exited with %s: %s' % (
                    self.name, self.proc.returncode, self.log()))
            if not os.path.exists(self.qmp_path):
                return False
            # QEMU binds the socket (the file appears) before it listens.
            try:
                self.qmp = Qmp(self.qmp_path, timeout=timeout)
            except ConnectionRefusedError:
                return False
            return True
        harness.wait_for(ready, timeout, 'QMP socket of %s' % self.name)
        return self

    def log(self):
        try:
            with open(self.logfile, errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    def status(self):
        return self.qmp.cmd('query-status')['status']

    def qemu_io(self, command, node='n0'):
        """Run qemu-io on the node; return what it printed.

        QEMU 7.2 prints qemu-io's output on its own stdout (our log), not
        in the HMP reply: read it from there.
        """
        mark = os.path.getsize(self.logfile)
        reply = self.qmp.qemu_io(node, command)
        with open(self.logfile, 'rb') as f:
            f.seek(mark)
            return reply + f.read().decode(errors='replace')

    def quit(self, timeout=20):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.qmp.cmd('quit')
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.qmp:
            self.qmp.close()


@pytest.fixture
def qemus():
    if shutil.which(QEMU) is None:
        pytest.skip('%s is not installed (run tools/setup.sh)' % QEMU)
    started = []
    yield started
    for q in started:
        q.kill()


def check_pattern(qemu, byte, off, length, what):
    out = qemu.qemu_io('read -P 0x%02x %d %d' % (byte, off, length))
    assert 'read %d/%d bytes' % (length, length) in out and \
        'Pattern verification failed' not in out, \
        '%s: read -P 0x%02x %d %d on %s said: %s' % (
            what, byte, off, length, qemu.name, out)


def write_pattern(qemu, orc, byte, off, length):
    out = qemu.qemu_io('write -P 0x%02x %d %d' % (byte, off, length))
    assert 'wrote %d/%d bytes' % (length, length) in out, out
    orc.write(off, bytes([byte]) * length)


@pytest.mark.timeout(120)
@pytest.mark.parametrize('strategy,policy', [
    ('hybrid', 'write_back'), ('firepan_if', 'write_back'),
    ('hybrid', 'read_only'), ('firepan', 'write_back'),
    ('cloudcache', 'write_back'), ('cachemior', 'write_through'),
    ('none', 'write_back')])
def test_qemu_live_migration(make_agent, make_origin, workdir, qemus,
                             strategy, policy):
    src, dst = mu.agent_pair(make_agent,
                             src_extra=mu.source_config(policy))
    origin = make_origin(VOLUME_SIZE)
    orc = om.Oracle(origin.content)
    res = src.attach('vol1', origin.uri, cache_size=VOLUME_CACHE,
                     write_policy=policy)
    vm_src = Qemu(workdir, 'qsrc', res['export_uri'])
    qemus.append(vm_src)
    vm_src.start()
    assert vm_src.status() == 'running'
    for byte, off, length in PATTERNS:
        write_pattern(vm_src, orc, byte, off, length)
    # The check itself: a wrong pattern is noticed.
    out = vm_src.qemu_io('read -P 0xee 0 4096')
    assert 'Pattern verification failed' in out, out
    # Warm the cache through the VM's disk too.
    out = vm_src.qemu_io('read 8M 4M')
    assert 'read 4194304/4194304 bytes' in out, out
    for byte, off, length in PATTERNS:
        check_pattern(vm_src, byte, off, length, 'source before migration')
    before = src.show('vol1')
    assert before['cached_blocks'] > 0, before
    if policy == 'write_back':
        assert before['dirty_blocks'] > 0, before

    s, d = src.client(), dst.client()
    # Copying strategies are slowed down so that the destination VM's I/O
    # below runs while the background copy does.
    rate = 4 if strategy in ('firepan_if', 'cloudcache', 'hybrid') else None
    prepared = migration.prepare(s, d, 'vol1', strategy,
                                 rate_limit_mbps=rate)
    mid = prepared['migration_id']
    port = harness.free_tcp_port()
    vm_dst = Qemu(workdir, 'qdst', prepared['export_uri'],
                  incoming='tcp:127.0.0.1:%d' % port)
    qemus.append(vm_dst)
    vm_dst.start()
    assert vm_dst.status() == 'inmigrate'

    if strategy == 'firepan':
        # firepan copies the cache while the VM is paused.
        vm_src.qmp.cmd('stop')
    t0 = time.monotonic()
    migration.start(s, d, mid)
    vm_src.qmp.cmd('migrate', uri='tcp:127.0.0.1:%d' % port)

    def migrated():
        st = vm_src.qmp.cmd('query-migrate')
        if st.get('status') in ('failed', 'cancelled'):
            raise AssertionError('QEMU migration %s: %s' % (st['status'], st))
        return st.get('status') == 'completed'
    harness.wait_for(migrated, 60, 'QEMU migration to complete',
                     interval=0.1)
    # QEMU reports the migration completed a moment before the source's
    # run state leaves finish-migrate.
    harness.wait_for(lambda: vm_src.status() == 'postmigrate', 10,
                     'source QEMU to reach postmigrate', interval=0.05)
    migration.switchover(s, d, mid)
    # The destination runs only once its disk is let through.
    harness.wait_for(lambda: vm_dst.status() == 'paused', 30,
                     'the destination QEMU to hold after the migration')
    vm_dst.qmp.cmd('cont')
    assert vm_dst.status() == 'running'
    vm_src.quit()
    # The VM works on the destination while the cache is still moving.
    during = mu.status(dst, mid)
    for byte, off, length in PATTERNS:
        check_pattern(vm_dst, byte, off, length, 'destination during')
    for byte, off, length in NEW:
        write_pattern(vm_dst, orc, byte, off, length)
    vm_dst.qemu_io('flush')
    for byte, off, length in NEW:
        check_pattern(vm_dst, byte, off, length, 'destination new data')
    summary = migration.finish(s, d, mid, timeout_s=60)
    elapsed = time.monotonic() - t0
    print('%s/%s: %s in %.1f s; right after cont: %s' % (
        strategy, policy, summary, elapsed, during))
    assert summary['state'] == 'completed', summary
    assert mu.volume_gone(src, 'vol1')
    if rate:
        assert during['state'] == 'switched', during
    for byte, off, length in PATTERNS + NEW:
        check_pattern(vm_dst, byte, off, length, 'destination after')
    # The whole disk, through another connection to the same export.
    h = om.connect(prepared['export_uri'])
    mism = om.verify_all(h, orc, 'destination export')
    om.close(h)
    assert not mism, mism
    if strategy in mu.COPYING:
        assert summary['blocks_transferred'] > 0, summary
    st = dst.show('vol1')
    assert st['io_errors'] == 0, st
    vm_dst.quit()
    dst.detach('vol1')
    mism = om.compare(orc, origin.read_file(), 'origin after detach')
    assert not mism, mism
    assert vm_src.proc.returncode is not None


@pytest.mark.timeout(90)
@pytest.mark.parametrize('order,policy', [
    ('driver', 'write_back'), ('driver', 'read_only'),
    ('qemu_first', 'write_through'), ('qemu_first', 'write_back')])
def test_destination_qemu_starts_before_switchover(make_agent, make_origin,
                                                   workdir, qemus, order,
                                                   policy):
    """The destination QEMU reaches ``inmigrate`` with no switchover yet.

    A destination QEMU opens its disk at start-up, long before the
    switchover, and virtio-blk reads sector 0 at realize to guess a disk
    geometry when none is given (libvirt gives none).  If that read waited
    for the switchover, QEMU would never accept the incoming migration
    that leads to it.  ``driver``: Nova's order (``start``, then libvirt
    starts QEMU): the source agent answers the read.  ``qemu_first``: QEMU
    between ``prepare`` and ``start``: the origin answers at once where it
    is current (write_through); a write_back volume's read is answered
    once the source connects.
    """
    src, dst = mu.agent_pair(make_agent)
    origin = make_origin(VOLUME_SIZE)
    orc = om.Oracle(origin.content)
    res = src.attach('vol1', origin.uri, cache_size=VOLUME_CACHE,
                     write_policy=policy)
    # Sector 0 changed on the source: dirty there under write_back.
    h = om.connect(res['export_uri'])
    mbr = bytes([0x5a]) * BS
    h.pwrite(mbr, 0)
    orc.write(0, mbr)
    om.close(h)
    s, d = src.client(), dst.client()
    prepared = migration.prepare(s, d, 'vol1', 'hybrid')
    mid = prepared['migration_id']
    port = harness.free_tcp_port()
    vm_dst = Qemu(workdir, 'qdst', prepared['export_uri'],
                  incoming='tcp:127.0.0.1:%d' % port, geometry=False)
    qemus.append(vm_dst)
    state = problem = None
    try:
        if order == 'driver':
            migration.start(s, d, mid)
            vm_dst.start(timeout=10)
        elif policy == 'write_back':
            # QEMU's read waits for the source: start it meanwhile.
            starter = threading.Thread(target=vm_dst.start,
                                       kwargs={'timeout': 20})
            starter.start()
            time.sleep(0.5)
            migration.start(s, d, mid)
            starter.join(30)
        else:
            vm_dst.start(timeout=10)
            migration.start(s, d, mid)
        state = vm_dst.status()
        # The read QEMU made, and one of ours, see the source's sector 0.
        dh = om.connect(prepared['export_uri'])
        got = dh.pread(BS, 0)
        om.close(dh)
        st = mu.status(dst, mid)
    except (AssertionError, OSError) as exc:
        problem = exc
    finally:
        # Whatever happened, roll back: that lets a held request go.
        migration.abort(s, d, mid)
    assert state == 'inmigrate', (
        'the destination QEMU (-incoming, no explicit geometry) did not '
        'answer QMP (%s): its disk read at device realize waited for the '
        'switchover, which needs this QEMU to receive the migration first.  '
        'Destination agent log:\n%s' % (
            problem, mu.log_excerpt(dst, 'nbd|migration', 12)))
    assert not orc.check(0, bytearray(got)), 'stale sector 0 before the switch'
    if order == 'driver' or policy == 'write_back':
        assert st['forwarded_reads'] >= 2, st
    # The source kept the VM's volume, sector 0 and all.
    h = om.connect(res['export_uri'])
    assert not orc.check(0, bytearray(h.pread(BS, 0)))
    om.close(h)
