# SPDX-License-Identifier: Apache-2.0
"""Helpers of the live cache migration tests.

* :class:`Vm`: the VM stand-in.  An oracle workload (libnbd aio, many
  requests in flight) in a thread, that can be paused (everything in
  flight completes), moved to another export and resumed, like a VM that
  live-migrates.  One oracle follows it from host to host.
* read passes with hit-ratio deltas from ``volume-show``;
* the raw transfer protocol (frames, CRC-32C) for the fault tests;
* :class:`TcpProxy`: a link between the agents that a test can cut;
* the ``fcache`` command line as a subprocess.
"""

import errno
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

import nbd

from nova_ext import exception

from . import harness
from . import oracle as om

MiB = 1 << 20
BS = 4096
EPERM = 1
EIO = 5

# The volume of most tests: a cache smaller than the data.
VOLUME_SIZE = 32 * MiB
VOLUME_CACHE = 8 * MiB
# The pre-migration hot working set, and where the VM works meanwhile.
HOT = (2 * MiB, 4 * MiB)
WORK = (12 * MiB, 14 * MiB)

COPYING = ('firepan', 'firepan_if', 'cloudcache', 'hybrid')
# Strategies whose destination cache must be warm after finish.
WARM = COPYING + ('cachemior',)


def agent_pair(make_agent, cache_size='32M', src_extra=None,
               dst_extra=None):
    """Two started agents, each with its own migration_listen port."""
    src = make_agent(name='src', cache_size=cache_size, **(src_extra or {}))
    dst = make_agent(name='dst', cache_size=cache_size, **(dst_extra or {}))
    return src.start(), dst.start()


def source_config(policy):
    """Source agent settings: keep dirty blocks until they move.

    write_back: a batch every 5 s, continuous only above a quarter of the
    cache dirty, so that a few hundred dirty blocks wait for the
    migration while three quarters of the cache stay evictable (dirty
    blocks are never evicted: a cache full of them takes no new block).
    """
    if policy != 'write_back':
        return {}
    return {'writeback_interval_ms': 5000, 'dirty_high_percent': 25}


# ---------------------------------------------------------------------------
# The VM stand-in
# ---------------------------------------------------------------------------

MODIFY_KINDS = ('write', 'zero', 'trim')


class CountingWorkload(om.Workload):
    """An oracle workload that also counts completions (for the gate)."""

    def __init__(self, *a, **kw):
        super(CountingWorkload, self).__init__(*a, **kw)
        self.completions = 0
        self.modify_completions = 0     # writes, zeroes, trims

    def _process_completions(self):
        self.completions += len(self.completed)
        self.modify_completions += sum(1 for req, _ in self.completed
                                       if req.kind in MODIFY_KINDS)
        super(CountingWorkload, self)._process_completions()


class Vm(object):
    """An oracle workload in a thread: run, pause, move, resume.

    ``pause()`` returns once every request in flight has completed, as a
    VM that stops its vCPUs and drains its block queue; ``move(uri)``
    connects to another export (the destination's) and drops the old
    handle; ``resume()`` goes on with the same oracle.
    """

    def __init__(self, uri, oracle, seed, name='vm', **workload_kw):
        self.name = name
        self.uri = uri
        self.h = om.connect(uri, name=name)
        self.wl = CountingWorkload(self.h, oracle, seed=seed, **workload_kw)
        self.oracle = oracle
        self.thread = None
        self.stop_event = None
        self.exc = None
        self.run_time = 0.0
        self._t0 = None

    def _run(self):
        try:
            self.wl.run(stop=self.stop_event, timeout=600)
        except BaseException as exc:      # reported by pause()
            self.exc = exc

    def resume(self):
        assert self.thread is None, 'already running'
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=self.name)
        self._t0 = time.monotonic()
        self.thread.start()
        return self

    def pause(self, timeout=60):
        if self.thread is None:
            return self
        self.stop_event.set()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError('%s did not drain within %s s: %d requests '
                                 'in flight' % (self.name, timeout,
                                                len(self.wl.inflight)))
        self.thread = None
        self.run_time += time.monotonic() - self._t0
        if self.exc:
            raise self.exc
        return self

    @property
    def running(self):
        return self.thread is not None

    def move(self, uri):
        """Reconnect to ``uri`` (the VM is paused)."""
        assert self.thread is None, 'pause first'
        old = self.h
        self.h = om.connect(uri, name=self.name)
        self.wl.h = self.h
        self.uri = uri
        om.close(old)
        return self

    def run_for(self, seconds):
        self.resume()
        time.sleep(seconds)
        return self.pause()

    def close(self):
        try:
            self.pause(timeout=30)
        finally:
            om.close(self.h)


# ---------------------------------------------------------------------------
# A warmed source volume
# ---------------------------------------------------------------------------

def setup_source(make_agent, make_origin, policy, seed=1, warm_ops=3000,
                 src_extra=None, dst_extra=None):
    """Agents, origin, a warmed source volume and a VM on it (paused)."""
    extra = source_config(policy)
    extra.update(src_extra or {})
    src, dst = agent_pair(make_agent, src_extra=extra, dst_extra=dst_extra)
    origin = make_origin(VOLUME_SIZE, seed=seed)
    res = src.attach('vol1', origin.uri, cache_size=VOLUME_CACHE,
                     write_policy=policy)
    orc = om.Oracle(origin.content)
    warm = om.Workload(om.connect(res['export_uri']), orc, seed=seed)
    warm.run(nops=warm_ops)
    warm.assert_clean()
    om.close(warm.h)
    vm = Vm(res['export_uri'], orc, seed=seed + 100, region=WORK,
            hot_share=0.0)
    return src, dst, origin, orc, vm, res['export_uri']


def warm_sets(src, orc, uri):
    """Cache WORK, then HOT (MRU); return the source's hit ratio of HOT."""
    h = om.connect(uri, name='warm-sets')
    try:
        hit_pass(src, 'vol1', h, orc, WORK[0], WORK[1], 'source WORK pass')
        hit_pass(src, 'vol1', h, orc, HOT[0], HOT[1], 'source HOT pass 1')
        ratio = hit_pass(src, 'vol1', h, orc, HOT[0], HOT[1],
                         'source HOT pass 2')
    finally:
        om.close(h)
    return ratio


def warmed_volume(make_agent, make_origin, policy='write_back',
                  cache=VOLUME_CACHE, warm_ops=3000, src_extra=None):
    """Agents and a source volume whose cache is full (HOT most recent)."""
    src, dst, origin, orc, vm, uri = setup_source(
        make_agent, make_origin, policy, warm_ops=warm_ops,
        src_extra=src_extra)
    om.close(vm.h)
    if policy == 'write_back':
        # Let write-back bring the dirty blocks down to its threshold, so
        # that the rest of the cache can take new blocks.
        harness.wait_for(lambda: src.show('vol1')['dirty_blocks'] <=
                         0.3 * cache / BS, 30, 'write-back to catch up')
    h = om.connect(uri, name='fill')
    # Fill the cache: everything but HOT and WORK, then WORK, then HOT.
    for lo in range(0, VOLUME_SIZE, 4 * MiB):
        if src.show('vol1')['cached_blocks'] * BS >= cache:
            break
        data, errors = om.read_range(h, lo, lo + 4 * MiB)
        assert not errors and not check_range(orc, lo, data, 'fill')
    om.close(h)
    # A miss goes around the cache when the oldest blocks it may look at
    # are all dirty or being written back (doc/reference/ucache.rst): with
    # write-back running, a few HOT blocks can miss their place in a pass.
    # Read again until HOT is cached, as a VM re-reading it would.
    for _ in range(3):
        ratio = warm_sets(src, orc, uri)
        if ratio > 0.95:
            break
    assert ratio > 0.95, ratio
    st = src.show('vol1')
    assert st['cached_blocks'] * BS == cache, st
    return src, dst, origin, orc, uri


# ---------------------------------------------------------------------------
# Reads, checked by the oracle, and their hit ratio
# ---------------------------------------------------------------------------

def check_range(oracle, lo, data, what):
    """Oracle mismatches of ``data`` read at ``lo`` (1 MiB pieces)."""
    out = []
    for a in range(0, len(data), MiB):
        m = oracle.check(lo + a, data[a:a + MiB], what=what)
        if m:
            out.append(m)
    return out


def hit_pass(agent, volume_id, h, oracle, lo, hi, what):
    """Read [lo, hi) once; assert it matches; return the pass's hit ratio.

    The ratio is ``read_hits / (read_hits + read_misses)`` over the pass,
    from volume-show before and after (nothing else may use the volume).
    """
    before = agent.show(volume_id)
    data, errors = om.read_range(h, lo, hi)
    after = agent.show(volume_id)
    assert not errors, '%s: read errors %s' % (what, errors[:5])
    mism = check_range(oracle, lo, data, what)
    assert not mism, mism
    hits = after['read_hits'] - before['read_hits']
    misses = after['read_misses'] - before['read_misses']
    assert hits + misses >= (hi - lo) // BS, (what, before, after)
    return hits / float(hits + misses)


def scan_blocks(h, size, oracle, depth=32, timeout=120):
    """Read every block on its own; return (mismatches, {errno: count}, bad).

    A block either reads back what the oracle says (where it knows) or
    fails; ``bad`` lists the failed block numbers.
    """
    mism = []
    errs = {}
    bad = []
    pieces = ((off, BS) for off in range(0, size // BS * BS, BS))
    for off, data, err in om.aio_reads(h, pieces, depth, timeout,
                                       'block scan'):
        if err:
            errs[err] = errs.get(err, 0) + 1
            bad.append(off // BS)
            continue
        m = oracle.check(off, data, what='scan read')
        if m:
            mism.append(m)
    return mism, errs, sorted(bad)


def write_errno(h, off=0, length=BS, payload=None):
    """Write through ``h``; return 0 or the errno the server answered."""
    data = payload if payload is not None else b'\xa5' * length
    try:
        h.pwrite(data, off)
        return 0
    except nbd.Error as exc:
        return exc.errnum or -1


def modify_errnos(h, off):
    """Errnos of a write, a write-zeroes and a trim of one block at off."""
    out = {'write': write_errno(h, off)}
    for kind, call in (('zero', h.zero), ('trim', h.trim)):
        try:
            call(BS, off)
            out[kind] = 0
        except nbd.Error as exc:
            out[kind] = exc.errnum or -1
    return out


def _gated(h, issue, what, wait):
    """Issue one aio request with ``issue(completion)``; see gated()."""
    res = []

    def cb(err):
        res.append(err.value)
        return 1
    issue(cb)
    deadline = time.monotonic() + wait
    while not res and time.monotonic() < deadline:
        h.poll(50)
    pending = not res

    def finish(timeout=30):
        end = time.monotonic() + timeout
        while not res:
            if time.monotonic() > end:
                raise AssertionError('%s did not complete in %s s'
                                     % (what, timeout))
            h.poll(200)
        return res[0]
    return pending, finish


def gated(h, off, length, wait=0.4):
    """Issue a read; return (still_pending_after_wait, finish) .

    ``finish(timeout)`` waits for the read and returns (errno, data).
    """
    buf = nbd.Buffer(length)
    pending, done = _gated(
        h, lambda cb: h.aio_pread(buf, off, completion=cb), 'gated read',
        wait)

    def finish(timeout=30):
        return done(timeout), bytes(buf.to_bytearray())
    return pending, finish


def gated_write(h, off, data, wait=0.4):
    """Issue a write; return (still_pending_after_wait, finish).

    ``finish(timeout)`` waits for the write and returns its errno.
    """
    return _gated(
        h, lambda cb: h.aio_pwrite(bytes(data), off, completion=cb),
        'gated write', wait)


# ---------------------------------------------------------------------------
# Migration control
# ---------------------------------------------------------------------------

def status(agent, mid):
    return agent.client().call('migration-status', migration_id=mid)


def wait_state(agent, mid, states, timeout=60):
    """Wait until the migration's state is one of ``states``."""
    last = {}

    def check():
        last['st'] = status(agent, mid)
        return last['st']['state'] in states
    try:
        harness.wait_for(check, timeout, 'migration %s to be %s' % (
            mid, '/'.join(states)), interval=0.05)
    except harness.TimeoutExpired as exc:
        raise AssertionError('%s; last status %s' % (exc, last.get('st')))
    return last['st']


def source_key(src, mid, volume_id):
    """The source's fingerprint for ``mid`` (``migration_tls = pinned``).

    None when the source agent runs another mode (it makes no key then),
    or is older than the pinned mode (it does not know ``migration-key``).
    """
    try:
        return src.client().call('migration-key', migration_id=mid,
                                 volume_id=volume_id).get('fingerprint')
    except exception.AgentError as exc:
        if exc.errno != errno.EOPNOTSUPP:
            raise
        return None


def manual_prepare(src, dst, volume_id, strategy, token=None, mid=None,
                   destination=None, rate_limit_bps=0):
    """What nova_ext.migration.prepare does, with a token the test knows.

    ``destination`` overrides where the source connects (a proxy).  The
    result also holds both agents' fingerprints (``source_fingerprint``,
    ``fingerprint``), as the orchestrator passes them.
    """
    token = token or secrets.token_hex(32)
    mid = mid or str(uuid.uuid4())
    vol = src.show(volume_id)
    src_fp = source_key(src, mid, volume_id)
    incoming = dst.client().call(
        'migration-incoming', migration_id=mid, volume_id=volume_id,
        token=token, strategy=strategy, origin=vol['origin'],
        cache_size=vol['cache_size'], write_policy=vol['write_policy'],
        admission=vol.get('admission', 'all'),
        **pinned_args(src_fp))
    src.client().call(
        'migration-outgoing', migration_id=mid, volume_id=volume_id,
        token=token, strategy=strategy,
        destination=destination or incoming['listen'],
        rate_limit_bps=rate_limit_bps,
        **pinned_args(incoming.get('fingerprint')))
    return {'migration_id': mid, 'volume_id': volume_id, 'token': token,
            'strategy': strategy, 'export_uri': incoming['export_uri'],
            'listen': incoming['listen'], 'destination': incoming['listen'],
            'fingerprint': incoming.get('fingerprint'),
            'source_fingerprint': src_fp}


def pinned_args(fingerprint):
    """``peer_fingerprint`` for a control call, when there is one."""
    return {'peer_fingerprint': fingerprint} if fingerprint else {}


def incoming_only(dst, volume_id, origin_uri, cache_size, policy,
                  strategy='hybrid', token=None, mid=None, src=None):
    """Register an incoming migration on ``dst`` alone (fake source).

    With ``src``, the destination pins that agent's key for the migration
    (``migration_tls = pinned``) and ``src`` may register the outgoing
    side (:func:`outgoing_only`); without it, it pins a key nobody holds:
    only a scripted source in plaintext (``migration_tls = none``, where
    the pin is not used) can connect.
    """
    token = secrets.token_hex(32) if token is None else token
    mid = str(uuid.uuid4()) if mid is None else mid
    src_fp = (source_key(src, mid, volume_id) if src is not None
              else secrets.token_hex(32))
    res = dst.client().call(
        'migration-incoming', migration_id=mid, volume_id=volume_id,
        token=token, strategy=strategy, origin=origin_uri,
        cache_size=cache_size, write_policy=policy, admission='all',
        peer_fingerprint=src_fp)
    res['token'] = token
    res['migration_id'] = mid
    return res


def outgoing_only(src, inc, volume_id, strategy, destination=None,
                  rate_limit_bps=0):
    """The source's side of what :func:`incoming_only` registered."""
    return src.client().call(
        'migration-outgoing', migration_id=inc['migration_id'],
        volume_id=volume_id, token=inc['token'], strategy=strategy,
        destination=destination or inc['listen'],
        rate_limit_bps=rate_limit_bps,
        **pinned_args(inc.get('fingerprint')))


def assert_settled_volume_serves(dst, orc, res, volume_id='vol1'):
    """dst serves the settled volume, the oracle's data and new writes.

    Every block equals the oracle, and a workload on it reads what it
    wrote.
    """
    show = dst.show(volume_id)
    assert show['state'] != 'unavailable' and show['export_uri'], show
    h = om.connect(show['export_uri'], name='settled')
    mism, errs, _ = scan_blocks(h, VOLUME_SIZE, orc)
    assert not mism and not errs, (
        'after settling (%s) %d blocks read wrong data and %d failed; first '
        'wrong: %s' % (res, len(mism), len(errs), mism[:3]))
    wl = om.Workload(h, orc, seed=31)
    wl.run(nops=600)
    wl.assert_clean()
    om.close(h)


def volume_gone(agent, volume_id):
    try:
        agent.show(volume_id)
    except exception.AgentError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------------------
# The transfer protocol, for the fault tests
# ---------------------------------------------------------------------------

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b'123456789') == 0xE3069283

MAGIC = 0x31584346
T_HELLO, T_WELCOME, T_ERROR, T_LIST, T_SWITCH, T_BLOCK = 1, 2, 3, 4, 5, 6
T_FETCH, T_CREDIT, T_ACK, T_DONE, T_COMPLETE = 7, 8, 9, 10, 11
T_READ, T_DATA = 12, 13
F_RETRY, F_ERROR = 1 << 3, 1 << 4


def frame(ftype, payload=b'', flags=0, version=1, corrupt_crc=False):
    head = struct.pack('<IBBHI', MAGIC, version, ftype, flags, len(payload))
    crc = crc32c(head + payload)
    if corrupt_crc:
        crc ^= 0x1
    return head + struct.pack('<I', crc) + payload


def hello(mid, volume_id, token, block_size=BS, strategy='hybrid',
          reads=None):
    msg = {'migration_id': mid, 'volume_id': volume_id, 'token': token,
           'block_size': block_size, 'strategy': strategy}
    if reads is not None:
        msg['reads'] = reads
    return frame(T_HELLO, json.dumps(msg).encode())


def recv_frame(sock, timeout=10):
    """Read one frame: (type, flags, payload); None if the peer closed."""
    sock.settimeout(timeout)
    head = _recv_exact(sock, 16)
    if head is None:
        return None
    magic, ver, ftype, flags, length, crc = struct.unpack('<IBBHII', head)
    assert magic == MAGIC and ver == 1, head
    payload = _recv_exact(sock, length) if length else b''
    assert payload is not None, 'truncated frame'
    assert crc32c(head[:12] + payload) == crc, 'bad CRC from the agent'
    return ftype, flags, payload


def _recv_exact(sock, n):
    buf = b''
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            chunk = b''
        if not chunk:
            return None
        buf += chunk
    return buf


def connect_listen(hostport, timeout=10):
    host, port = hostport.rsplit(':', 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def exchange(hostport, data, timeout=10):
    """Send ``data`` as the first bytes of a stream; return the answer.

    Returns the first frame the agent sends (or None if it closed without
    one) and whether it closed the stream afterwards.
    """
    s = connect_listen(hostport, timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        first = recv_frame(s, timeout)
        closed = first is None or recv_frame(s, timeout) is None
        return first, closed
    finally:
        s.close()


# ---------------------------------------------------------------------------
# A link between the agents that a test can cut
# ---------------------------------------------------------------------------

class TcpProxy(object):
    """Forwards 127.0.0.1:port to ``target``; ``cut()`` closes everything.

    ``captured`` keeps every byte forwarded either way (what someone on the
    path would see); ``tamper_at``: flip one bit of the client-to-target
    direction at that byte offset, as a forger on the path would;
    ``refuse_first``: close that many connections as soon as they are
    accepted, as a migration listener with no slot free does.
    """

    def __init__(self, target, tamper_at=None, refuse_first=0):
        self.tamper_at = tamper_at
        self.refuse_first = refuse_first
        self.refused = 0
        self.captured = bytearray()
        self.forwarded = 0
        host, port = target.rsplit(':', 1)
        self.target = (host, int(port))
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(('127.0.0.1', 0))
        self.lsock.listen(4)
        self.address = '127.0.0.1:%d' % self.lsock.getsockname()[1]
        self.socks = []
        self.bytes = 0
        self.cut_done = threading.Event()
        self.lock = threading.Lock()
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self):
        while not self.cut_done.is_set():
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            if self.refused < self.refuse_first:
                self.refused += 1
                c.close()
                continue
            try:
                u = socket.create_connection(self.target, timeout=10)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            with self.lock:
                if self.cut_done.is_set():
                    c.close()
                    u.close()
                    return
                self.socks += [c, u]
            for a, b, forward in ((c, u, True), (u, c, False)):
                t = threading.Thread(target=self._pump, args=(a, b, forward),
                                     daemon=True)
                t.start()
                self.threads.append(t)

    def _pump(self, a, b, forward):
        while True:
            try:
                data = bytearray(a.recv(65536))
            except OSError:
                data = b''
            if not data:
                break
            with self.lock:
                self.bytes += len(data)
                self.captured += data
                at = self.tamper_at
                if forward and at is not None and \
                        self.forwarded <= at < self.forwarded + len(data):
                    data[at - self.forwarded] ^= 0x01
                self.forwarded += len(data) if forward else 0
            try:
                b.sendall(data)
            except OSError:
                break
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        """Abortive close (RST) of both sides of every connection."""
        self.cut_done.set()
        self._reset()
        try:
            self.lsock.close()
        except OSError:
            pass

    def reset(self):
        """Reset the connections open now; later ones pass again.

        A link that fails and comes back: the migration's stream is lost,
        a later connection (a settle session) gets through.
        """
        self._reset()

    def _reset(self):
        with self.lock:
            socks, self.socks = list(self.socks), []
        for s in socks:
            # Linger 0: the close resets the connection.  shutdown() first
            # wakes the pump blocked in recv() on it (a close alone would
            # not, and the kernel would keep the socket open under it).
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                             struct.pack('ii', 1, 0))
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for s in socks:
            try:
                s.close()
            except OSError:
                pass

    def close(self):
        self.cut()
        for t in self.threads:
            t.join(5)


# ---------------------------------------------------------------------------
# The fcache command line
# ---------------------------------------------------------------------------

def fcache_argv():
    exe = os.path.join(os.path.dirname(sys.executable), 'fcache')
    if os.path.exists(exe):
        return [exe]
    exe = shutil.which('fcache')
    if exe:
        return [exe]
    return [sys.executable, '-m', 'nova_ext.cli']


def fcache(args, timeout=120):
    env = dict(os.environ)
    env.pop('FCACHE_SOCKET', None)
    r = subprocess.run(fcache_argv() + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, env=env)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def fcache_json(args, timeout=120):
    rc, out, err = fcache(list(args) + ['--json'], timeout=timeout)
    assert rc == 0, (args, rc, out, err)
    return json.loads(out)


def log_excerpt(agent, pattern='migration|refused|error', limit=40):
    lines = harness.grep(agent.log(), pattern)
    return '\n'.join(lines[-limit:])
