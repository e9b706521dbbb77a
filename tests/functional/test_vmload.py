# SPDX-License-Identifier: Apache-2.0
"""vmload, the benchmarks' "VM": fio's Figure-5 job over NBD (libnbd async).

Runs the real tool (``fcache_agent/build/vmload``) against nbdkit memory
servers, an nbdkit file server and an fcache agent export, with --verify:
the mix and the zone skew are those of fio's ``rwmixread=80`` and
``random_distribution=zoned:50/5:30/15:20/80``, the command protocol
(pause / switch / resume / stats / quit) does what a live migration needs,
and a corruption of the data behind the VM's back is caught.
"""

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time

import pytest

from fcache_testkit import harness

VMLOAD = os.path.join(harness.AGENT_DIR, 'build', 'vmload')
MiB = 1 << 20


def _require(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip('missing tools: %s' % ', '.join(missing))


@pytest.fixture(scope='module')
def vmload_bin(tmp_path_factory):
    """Build vmload and work on a private copy (others may rebuild)."""
    r = subprocess.run(['make', '-s', '-C', harness.AGENT_DIR, 'build/vmload'],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=600)
    if r.returncode != 0 and not os.path.exists(VMLOAD):
        raise AssertionError('cannot build vmload:\n%s' %
                             r.stdout.decode(errors='replace')[-4000:])
    dest = str(tmp_path_factory.mktemp('vmload') / 'vmload')
    shutil.copy2(VMLOAD, dest)
    return dest


class MemServer(object):
    """``nbdkit memory SIZE`` on a unix socket."""

    def __init__(self, directory, name, size):
        _require('nbdkit')
        self.socket = os.path.join(directory, name + '.sock')
        self.pidfile = os.path.join(directory, name + '.pid')
        self.proc = subprocess.Popen(
            ['nbdkit', '--exit-with-parent', '-f', '-U', self.socket,
             '-P', self.pidfile, 'memory', str(size)],
            stdin=subprocess.DEVNULL)
        harness.wait_for(lambda: os.path.exists(self.pidfile), 10,
                         'nbdkit memory on %s' % self.socket)

    @property
    def uri(self):
        return 'nbd+unix:///?socket=%s' % self.socket

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def mem_server(workdir):
    servers = []

    def make(name, size):
        s = MemServer(workdir, name, size)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.stop()


class VMLoad(object):
    """A running vmload: its stdout lines go through a queue."""

    def __init__(self, binary, uri, *args, workdir=None):
        self.stderr_path = os.path.join(workdir, 'vmload.%d.err' % id(self))
        self._err = open(self.stderr_path, 'wb')
        self.proc = subprocess.Popen(
            [binary, '--uri', uri] + [str(a) for a in args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
            universal_newlines=True, bufsize=1)
        self.lines = queue.Queue()
        self.samples = []      # per-second report lines, parsed
        self.stats_lines = []  # JSON lines of stats / quit
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip('\n'))
        self.lines.put(None)

    def _classify(self, line):
        if line.startswith('t='):
            self.samples.append(dict(kv.split('=', 1)
                                     for kv in line.split()))
            return None
        if line.startswith('{'):
            obj = json.loads(line)
            if 't' in obj:
                self.samples.append(obj)
            else:
                self.stats_lines.append(obj)
            return None
        return line

    def pump(self, timeout):
        """Consume output for ``timeout`` seconds (or until EOF)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return
            if line is None:
                self.lines.put(None)
                return
            other = self._classify(line)
            assert other is None, 'unexpected output line %r' % other

    def command(self, cmd, timeout=20):
        """Send a command; return its ``ok``/``error`` line."""
        self.proc.stdin.write(cmd + '\n')
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, 'no answer to %r within %s s' % (cmd, timeout)
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, 'vmload exited during %r: %s' % (
                cmd, self.stderr())
            other = self._classify(line)
            if other is None:
                continue
            assert other.startswith(('ok ', 'error ')), other
            return other

    def stats(self):
        n = len(self.stats_lines)
        assert self.command('stats') == 'ok stats'
        assert len(self.stats_lines) == n + 1
        return self.stats_lines[-1]

    def quit(self, timeout=30):
        n = len(self.stats_lines)
        assert self.command('quit', timeout) == 'ok quit'
        rc = self.proc.wait(timeout)
        self.pump(1)
        assert len(self.stats_lines) == n + 1
        return rc, self.stats_lines[-1]

    def wait(self, timeout=30):
        rc = self.proc.wait(timeout)
        self.pump(2)
        return rc

    def stderr(self):
        self._err.flush()
        with open(self.stderr_path, 'r', errors='replace') as f:
            return f.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._err.close()


@pytest.fixture
def vmload(vmload_bin, workdir):
    procs = []

    def start(uri, *args):
        v = VMLoad(vmload_bin, uri, *args, workdir=workdir)
        procs.append(v)
        return v
    yield start
    for v in procs:
        v.close()


def check_clean(st):
    assert st['reads'] > 0 and st['writes'] > 0, st
    assert st['errors'] == 0 and st['mismatches'] == 0, st
    assert st['read_bytes'] == st['reads'] * 4096, st
    assert st['write_bytes'] == st['writes'] * 4096, st


# ---------------------------------------------------------------------------


def test_bad_arguments(vmload_bin):
    cases = [
        [],                                             # no --uri
        ['--uri', 'nbd://x', '--jobs', '0'],
        ['--uri', 'nbd://x', '--iodepth', 'many'],
        ['--uri', 'nbd://x', '--bs', '1000'],
        ['--uri', 'nbd://x', '--size', '10000'],        # not a multiple of bs
        ['--uri', 'nbd://x', '--rwmix-read', '101'],
        ['--uri', 'nbd://x', '--zoned', '50/5:30/15'],  # does not add up
        ['--uri', 'nbd://x', '--zoned', 'hot'],
        ['--uri', 'nbd://x', '--duration', '-1'],
        ['--uri', 'nbd://x', '--frobnicate'],
        ['--uri', 'nbd://x', 'extra'],
    ]
    for args in cases:
        r = subprocess.run([vmload_bin] + args, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=10)
        assert r.returncode == 2, (args, r)
        assert r.stdout == '', (args, r.stdout)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith('vmload: '), (args, r)


def test_unreachable_export_exits_3(vmload_bin, workdir):
    r = subprocess.run([vmload_bin, '--uri', 'nbd+unix:///?socket=%s' %
                        os.path.join(workdir, 'nothing.sock')],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=10)
    assert r.returncode == 3, r
    assert 'cannot connect' in r.stderr


def test_server_death_while_running_exits_3(vmload, mem_server):
    srv = mem_server('mem', 64 * MiB)
    v = vmload(srv.uri, '--jobs', '2', '--size', '8M')
    v.pump(1.0)
    srv.proc.kill()
    rc = v.wait(20)
    err = v.stderr()
    assert 'NBD connection lost' in err or 'cannot issue' in err, err
    # Debian 12's libnbd (1.14) now and then aborts inside its own state
    # machine when a server's socket is reset under another job's handle
    # ("generator/states.c: enter_STATE_DEAD: Assertion `nbd_get_error ()'
    # failed"), after vmload has reported the loss: 2 runs in 25 here, the
    # server being nbdkit.  A client library bug vmload cannot catch; any
    # other end than the documented exit 3 still fails.
    if rc == -signal.SIGABRT and 'enter_STATE_DEAD' in err:
        return
    assert rc == 3, err


def test_mix_zones_and_verify(vmload, mem_server, workdir):
    """fio's Figure 5 shape: 80:20 mix, 50/5:30/15:20/80 zones, 4 regions."""
    srv = mem_server('mem', 256 * MiB)
    trace = os.path.join(workdir, 'trace.txt')
    size = 16 * MiB
    v = vmload(srv.uri, '--verify', '--json', '--size', '16M',
               '--duration', '3', '--seed', '42', '--trace-offsets', trace)
    rc = v.wait(30)
    assert rc == 0, v.stderr()
    assert 'seed=42' in v.stderr()
    st = v.stats_lines[-1]
    check_clean(st)
    assert st['seed'] == '42'
    # One line per second, JSON with the documented keys.
    assert len(v.samples) >= 2, v.samples
    for s in v.samples:
        assert set(s) >= {'t', 'read_iops', 'write_iops', 'read_mbps',
                          'write_mbps', 'lat_ms_avg', 'errors', 'state',
                          'mismatches'}, s
        assert s['state'] == 'running' and s['mismatches'] == 0
    assert [round(s['t']) for s in v.samples[:2]] == [1, 2]
    assert v.samples[0]['read_iops'] > 0 and v.samples[0]['write_iops'] > 0
    total = st['reads'] + st['writes']
    assert abs(st['reads'] / total - 0.80) < 0.05, st

    # Every issued request, from the trace: regions, alignment, zones.
    zones = [0, 0, 0]
    kinds = {'R': 0, 'W': 0}
    jobs = set()
    n = 0
    with open(trace) as f:
        for line in f:
            job, kind, off = line.split()
            job, off = int(job), int(off)
            rel = off - job * size
            assert 0 <= rel < size and off % 4096 == 0, line
            frac = rel / size
            zones[0 if frac < 0.05 else 1 if frac < 0.20 else 2] += 1
            kinds[kind] += 1
            jobs.add(job)
            n += 1
    assert jobs == {0, 1, 2, 3}
    assert n == total
    got = [z / n for z in zones]
    for share, want in zip(got, (0.50, 0.30, 0.20)):
        assert abs(share - want) < 0.03, got
    assert abs(kinds['R'] / n - 0.80) < 0.03, kinds


def test_pause_copy_switch_resume(vmload, mem_server, workdir):
    """The live-migration sequence against two memory servers."""
    _require('nbdcopy')
    src = mem_server('src', 256 * MiB)
    dst = mem_server('dst', 256 * MiB)
    small = mem_server('small', 128 * MiB)
    v = vmload(src.uri, '--verify', '--size', '16M')
    v.pump(1.5)
    before = v.stats()
    check_clean(before)

    t0 = time.monotonic()
    ack = v.command('pause')
    assert ack.startswith('ok paused drain_ms='), ack
    assert float(ack.split('=')[1]) >= 0
    assert v.command('pause') == 'error already paused'
    n = v.stats()
    # Nothing moves while paused.
    v.pump(1.2)
    assert v.stats()['reads'] == n['reads']
    assert v.samples[-1]['state'] == 'paused', v.samples[-1]

    subprocess.run(['nbdcopy', src.uri, dst.uri], check=True, timeout=60)
    # The source dies while the VM is paused (its connections are dead
    # but idle): not an error, and the switch still works.
    # (SIGKILL: on SIGTERM nbdkit would wait for its clients to leave.)
    src.proc.kill()
    src.proc.wait(10)
    ack = v.command('switch ' + small.uri)
    assert ack.startswith('error ') and 'size' in ack, ack
    assert v.command('switch ' + dst.uri) == 'ok switched'
    ack = v.command('resume')
    paused_for = time.monotonic() - t0
    assert ack.startswith('ok resumed paused_ms='), ack
    paused_ms = float(ack.split('=')[1])
    assert 1000 <= paused_ms <= paused_for * 1000 + 50, (paused_ms,
                                                         paused_for)
    assert v.command('resume') == 'error not paused'
    assert v.command('switch ' + src.uri).startswith('error ')
    v.pump(1.5)
    rc, st = v.quit()
    assert rc == 0, v.stderr()
    check_clean(st)
    # Work went on after the switch, reading what was copied.
    assert st['reads'] > n['reads'] + 1000, (n, st)
    assert v.samples[-1]['state'] == 'running'


def test_corruption_is_detected(vmload, workdir):
    """Garbage written into the origin while the VM is paused is caught."""
    _require('nbdkit')
    path = os.path.join(workdir, 'disk.img')
    with open(path, 'wb') as f:
        f.truncate(64 * MiB)
    srv = harness.NbdkitOrigin(workdir, 'file', path).start()
    try:
        v = vmload(srv.uri, '--verify', '--jobs', '2', '--size', '16M')
        v.pump(1.5)
        assert v.command('pause').startswith('ok paused')
        assert v.stats()['mismatches'] == 0
        # Overwrite the hot zones of both regions behind nbdkit's back.
        with open(path, 'r+b') as f:
            for job in range(2):
                f.seek(job * 16 * MiB)
                f.write(os.urandom(16 * MiB // 20))
        assert v.command('resume').startswith('ok resumed')
        v.pump(1.0)
        rc, st = v.quit()
    finally:
        srv.stop()
    print(st, v.stderr())
    assert rc == 1, st
    assert st['mismatches'] > 0 and st['errors'] == 0, st
    err = v.stderr()
    reports = [ln for ln in err.splitlines() if ln.startswith('MISMATCH ')]
    assert 0 < len(reports) <= 10, err
    assert 'expected_gen=' in reports[0] and 'got=unrecognised' in reports[0]


def test_agent_write_back_export(vmload, make_agent, make_origin):
    """The VM on an fcache write_back volume: verified, and it hits."""
    agent = make_agent(cache_size='16M', writeback_interval_ms=50).start()
    origin = make_origin(64 * MiB)
    res = agent.attach('vm1', origin.uri, cache_size=8 * MiB,
                       write_policy='write_back')
    v = vmload(res['export_uri'], '--verify', '--size', '8M',
               '--iodepth', '16', '--duration', '3')
    rc = v.wait(60)
    assert rc == 0, v.stderr()
    st = v.stats_lines[-1]
    check_clean(st)
    assert len(v.samples) >= 2
    show = agent.show('vm1')
    print(st, show)
    # The agent saw exactly the requests vmload counted.
    assert (show['reads'], show['writes']) == (st['reads'], st['writes'])
    # 50 % of the accesses go to 5 % of 32 MiB: the 8 MiB cache holds them.
    assert show['hit_ratio'] > 0.5, show
    agent.detach('vm1')
    agent.assert_alive()


def test_switch_without_copy_is_detected(vmload, mem_server):
    """Switching to an export that lacks the data reads stale blocks."""
    src = mem_server('src', 64 * MiB)
    empty = mem_server('empty', 64 * MiB)
    v = vmload(src.uri, '--verify', '--jobs', '2', '--size', '8M')
    v.pump(1.0)
    assert v.command('pause').startswith('ok paused')
    assert v.command('switch ' + empty.uri) == 'ok switched'
    assert v.command('resume').startswith('ok resumed')
    v.pump(0.5)
    rc, st = v.quit()
    assert rc == 1, st
    assert st['mismatches'] > 0 and st['errors'] == 0, st
    assert 'MISMATCH job=' in v.stderr()
