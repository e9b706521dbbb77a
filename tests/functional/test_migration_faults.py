# SPDX-License-Identifier: Apache-2.0
"""Live cache migration under attack and under failure.

* The destination's listener accepts a transfer stream only with the
  one-time token given for that migration and volume: wrong, replayed and
  misdirected tokens, garbage, a silent peer, a corrupt frame after an
  authenticated HELLO -- each refused or failed with a clear state and
  message, and both agents go on working (the real migration still runs).
  These tests script the peer's frames and so speak the stream in
  plaintext (``scripted_peer``): TLS, in front of what they test, changes
  nothing behind it; test_migration_tls.py tests the TLS layer.
* A source agent killed (SIGKILL) during the background copy, a
  destination agent killed, the link between them cut: the survivors
  report ``failed`` with a reason; the destination never serves stale
  data -- a block whose only current copy was dirty on the source fails
  with EIO, everything else reads what the oracle says; the killed source
  recovers its dirty blocks when it restarts and nothing acknowledged is
  lost.
"""

import errno
import gc
import json
import os
import secrets
import socket
import struct
import threading
import time

import nbd
import pytest

from nova_ext import exception
from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

BS = mu.BS
MiB = mu.MiB
HOT = mu.HOT
WORK = mu.WORK
VOLUME_SIZE = mu.VOLUME_SIZE
VOLUME_CACHE = mu.VOLUME_CACHE
REFUSED = b'authentication failed'


def assert_refused(answer, closed):
    assert answer is not None, 'the listener closed without an ERROR frame'
    ftype, flags, payload = answer
    assert ftype == mu.T_ERROR, answer
    assert REFUSED in payload, payload
    assert closed, 'the listener kept a refused stream open'


def wait_log(agent, pattern, timeout=10):
    return harness.wait_for(lambda: harness.grep(agent.log(), pattern),
                            timeout, '%r in %s' % (pattern, agent.logfile))


def small_source(make_agent, make_origin, policy='write_back', size=8 * MiB,
                 ops=800):
    src, dst = mu.agent_pair(make_agent)
    origin = make_origin(size)
    res = src.attach('vol1', origin.uri, cache_size=4 * MiB,
                     write_policy=policy)
    orc = om.Oracle(origin.content)
    h = om.connect(res['export_uri'])
    wl = om.Workload(h, orc, seed=3)
    wl.run(nops=ops)
    wl.assert_clean()
    return src, dst, origin, orc, h


# ---------------------------------------------------------------------------
# Authentication
# ---------------------------------------------------------------------------

@pytest.mark.scripted_peer
@pytest.mark.timeout(90)
def test_stream_authentication(make_agent, make_origin):
    src, dst, origin, orc, h = small_source(make_agent, make_origin)
    # A second incoming migration on the destination, for another volume.
    origin2 = make_origin(4 * MiB)
    other = mu.incoming_only(dst, 'vol2', origin2.uri, 2 * MiB, 'read_only')
    token = secrets.token_hex(32)
    p = mu.manual_prepare(src, dst, 'vol1', 'hybrid', token=token)
    mid, listen = p['migration_id'], p['listen']

    cases = [
        ('wrong token', mu.hello(mid, 'vol1', secrets.token_hex(32)),
         'wrong token'),
        ('token of another migration', mu.hello(mid, 'vol1', other['token']),
         'wrong token'),
        ('this token for the other volume', mu.hello(mid, 'vol2', token),
         'token is for another volume'),
        ('this token with the other migration id',
         mu.hello(other['migration_id'], 'vol2', token), 'wrong token'),
        ('unknown migration id', mu.hello('nope', 'vol1', token),
         'no incoming migration'),
        ('empty token', mu.hello(mid, 'vol1', ''), 'wrong token'),
        ('garbage', b'GET / HTTP/1.1\r\nHost: x\r\n\r\n' + os.urandom(64),
         'refused'),
        ('HELLO with a bad CRC',
         mu.frame(mu.T_HELLO, mu.hello(mid, 'vol1', token)[16:],
                  corrupt_crc=True), 'refused'),
        ('HELLO of version 2',
         mu.frame(mu.T_HELLO, mu.hello(mid, 'vol1', token)[16:], version=2),
         'refused'),
        ('HELLO that is not JSON', mu.frame(mu.T_HELLO, b'{"migration_id'),
         'malformed HELLO'),
        ('FETCH before HELLO', mu.frame(mu.T_FETCH, b'\0' * 8),
         'first frame is not HELLO'),
        ('a block before HELLO', mu.frame(mu.T_BLOCK, b'\0' * (8 + BS)),
         'refused'),
        ('HELLO claiming 1 GiB', struct.pack('<IBBHII', mu.MAGIC, 1,
                                             mu.T_HELLO, 0, 1 << 30, 0),
         'refused'),
    ]
    for what, data, why in cases:
        mark = len(dst.log())
        answer, closed = mu.exchange(listen, data)
        try:
            assert_refused(answer, closed)
        except AssertionError as exc:
            raise AssertionError('%s: %s' % (what, exc))
        wait_log(dst, 'refused')
        new = dst.log()[mark:]
        assert why in new, (what, why, new[-2000:])
        # Nothing changed: both migrations are still waiting.
        assert mu.status(dst, mid)['state'] == 'prepared', what
        assert mu.status(dst, other['migration_id'])['state'] == 'prepared'

    # A peer that connects and says nothing holds the listener at most
    # for its HELLO timeout: the real source still gets in.
    silent = mu.connect_listen(listen)
    try:
        t0 = time.monotonic()
        migration.start(src.client(), dst.client(), mid)
        assert time.monotonic() - t0 < 9, 'start waited for a silent peer'
    finally:
        silent.close()
    # (The destination sends WELCOME just before it records the state.)
    mu.wait_state(dst, mid, ('connected',), timeout=5)

    # The token was used once: a replay is refused, the stream goes on.
    mark = len(dst.log())
    answer, closed = mu.exchange(listen, mu.hello(mid, 'vol1', token))
    assert_refused(answer, closed)
    wait_log(dst, 'token already used')
    assert 'token already used' in dst.log()[mark:]
    migration.switchover(src.client(), dst.client(), mid)
    res = migration.finish(src.client(), dst.client(), mid, timeout_s=60)
    assert res['state'] == 'completed', res
    # ... and after the migration is over, too.
    answer, closed = mu.exchange(listen, mu.hello(mid, 'vol1', token))
    assert_refused(answer, closed)

    dst_vol = dst.show('vol1')
    h2 = om.connect(dst_vol['export_uri'])
    assert not om.verify_all(h2, orc)
    om.close(h2)
    om.close(h)
    # The refused streams left no trace on the other migration.
    assert mu.status(dst, other['migration_id'])['state'] == 'prepared'
    dst.client().call('migration-abort', migration_id=other['migration_id'])
    assert mu.volume_gone(dst, 'vol2')
    src.assert_alive()
    dst.assert_alive()


@pytest.mark.scripted_peer
@pytest.mark.timeout(90)
def test_slow_and_many_peers_do_not_hold_the_listener(make_agent,
                                                      make_origin):
    """Peers that drip their HELLO, or flood, keep no one else out.

    From 127.0.0.2 (another host, to the listener): connections that send
    a byte a second hold a handshake slot for at most HELLO_TIMEOUT_S
    (5 s), however long they go on, and at most 16 of them run at once.
    Meanwhile a real source on 127.0.0.1 migrates at once.
    """
    src, dst, origin, orc, h = small_source(make_agent, make_origin)
    listen = dst.status().get('migration_listen') or \
        dst.settings['migration_listen']
    host, port = listen.rsplit(':', 1)
    hello = mu.hello('m-slow', 'vol1', 'ab' * 32)
    drippers = []
    for _ in range(24):
        c = socket.socket()
        c.bind(('127.0.0.2', 0))
        c.connect((host, int(port)))
        c.settimeout(10)
        drippers.append(c)
    t0 = time.monotonic()
    closed_at = {}
    stop = threading.Event()

    def drip():
        for i in range(10):
            for c in drippers:
                if c in closed_at:
                    continue
                try:
                    c.sendall(hello[i:i + 1])
                except OSError:
                    closed_at[c] = time.monotonic() - t0
            if stop.wait(1):
                return
    t = threading.Thread(target=drip, daemon=True)
    t.start()
    p = migration.prepare(src.client(), dst.client(), 'vol1', 'none')
    migration.start(src.client(), dst.client(), p['migration_id'])
    start_s = time.monotonic() - t0
    migration.switchover(src.client(), dst.client(), p['migration_id'])
    res = migration.finish(src.client(), dst.client(), p['migration_id'],
                           timeout_s=30)
    assert res['state'] == 'completed', res
    assert start_s < 4, 'the source waited %.1f s for the listener' % start_s
    t.join(15)
    stop.set()
    # Every dripper was cut off: 8 at once (over the per-address limit),
    # the other 16 at the HELLO deadline, whatever they still sent.
    for c in drippers:
        if c not in closed_at:
            try:
                got = c.recv(64)
            except OSError:
                got = b''
            assert got == b'' or b'authentication failed' in got, got
        c.close()
    assert wait_log(dst, 'too many handshakes in progress')
    assert wait_log(dst, 'Connection timed out|Timer expired|timed out')
    om.close(h)


def test_token_rules_at_registration(make_agent, make_origin):
    """Bad tokens and ids are refused before anything is registered."""
    src, dst, origin, orc, h = small_source(make_agent, make_origin, ops=50)
    om.close(h)
    good = secrets.token_hex(32)
    for token in ('', 'abc', good.upper(), good[:-1] + 'g', good + '0'):
        with pytest.raises(exception.AgentError) as ei:
            mu.incoming_only(dst, 'volx', origin.uri, MiB, 'read_only',
                             token=token)
        assert 'token' in str(ei.value), ei.value
    with pytest.raises(exception.AgentError) as ei:
        mu.incoming_only(dst, 'volx', origin.uri, MiB, 'read_only',
                         mid='a b')
    assert 'migration_id' in str(ei.value)
    assert dst.status()['volumes'] == [], dst.status()
    # The same id twice on one agent is refused.
    mu.incoming_only(dst, 'volx', origin.uri, MiB, 'read_only', mid='m1')
    with pytest.raises(exception.AgentError) as ei:
        mu.incoming_only(dst, 'voly', origin.uri, MiB, 'read_only', mid='m1')
    assert 'already exists' in str(ei.value)
    dst.client().call('migration-abort', migration_id='m1')
    assert dst.status()['volumes'] == []


# ---------------------------------------------------------------------------
# A fake source: authenticated, then a bad frame
# ---------------------------------------------------------------------------

def fake_source(dst, origin, policy='read_only', strategy='hybrid'):
    inc = mu.incoming_only(dst, 'vol1', origin.uri, 2 * MiB, policy,
                           strategy=strategy)
    s = mu.connect_listen(inc['listen'])
    s.sendall(mu.hello(inc['migration_id'], 'vol1', inc['token']))
    ftype, flags, payload = mu.recv_frame(s)
    assert ftype == mu.T_WELCOME, (ftype, payload)
    assert b'credits' in payload
    inc['welcome'] = payload
    return inc, s


# LIST flagged ORDER: the hot list after a copy in the device's order.
F_ORDER = 32

BAD_FRAMES = {
    'bad CRC': lambda: mu.frame(mu.T_LIST, struct.pack('<Q', 1),
                                corrupt_crc=True),
    'bad magic': lambda: b'XXXX' + mu.frame(mu.T_LIST, b'')[4:],
    'unknown type': lambda: mu.frame(99, b''),
    'oversized length': lambda: struct.pack('<IBBHII', mu.MAGIC, 1,
                                            mu.T_BLOCK, 0, 64 << 20, 0),
    'block of the wrong size': lambda: mu.frame(mu.T_BLOCK, b'\0' * 100),
    'background block flagged absent': lambda: mu.frame(
        mu.T_BLOCK, b'\0' * (8 + BS), flags=4),
    'credit of the wrong size': lambda: mu.frame(mu.T_CREDIT, b'\0' * 3),
    'list past the volume end': lambda: mu.frame(
        mu.T_LIST, struct.pack('<Q', 1 << 40)),
    # The fake source's volume has 2 MiB of cache: 512 blocks.
    'list longer than the cache': lambda: mu.frame(
        mu.T_LIST, struct.pack('<513Q', *range(513))),
    'list of a partial entry': lambda: mu.frame(mu.T_LIST, b'\0' * 12),
    # hybrid uses blocks as they arrive: its WELCOME offers no ordering.
    'ordering list not offered': lambda: mu.frame(
        mu.T_LIST, struct.pack('<Q', 1), flags=F_ORDER),
    'truncated frame then close': lambda: mu.frame(mu.T_LIST,
                                                   b'\0' * 64)[:30],
}


@pytest.mark.scripted_peer
@pytest.mark.parametrize('bad', sorted(BAD_FRAMES))
def test_corrupt_frame_after_hello(make_agent, make_origin, bad):
    dst = make_agent(name='dst').start()
    origin = make_origin(4 * MiB)
    inc, s = fake_source(dst, origin)
    assert b'order' not in inc['welcome'], inc['welcome']
    mid = inc['migration_id']
    # (The destination sends WELCOME just before it records the state.)
    mu.wait_state(dst, mid, ('connected',), timeout=5)
    h = om.connect(inc['export_uri'])
    pending, finish_read = mu.gated(h, 0, BS)
    assert pending
    try:
        s.sendall(BAD_FRAMES[bad]())
        if bad == 'truncated frame then close':
            s.shutdown(socket.SHUT_WR)
        st = mu.wait_state(dst, mid, ('failed',), timeout=15)
    finally:
        s.close()
    assert 'transfer stream from the source lost' in st.get('error', ''), st
    print(bad, '->', st['error'])
    # The held read fails instead of guessing: the gate never opened.
    err, _ = finish_read()
    assert err == errno.EIO, err
    assert mu.write_errno(h, 0) == errno.EIO
    om.close(h)
    # The failed migration is rolled back; the agent goes on.
    dst.client().call('migration-abort', migration_id=mid)
    assert mu.volume_gone(dst, 'vol1')
    res = dst.attach('vol1', origin.uri, cache_size=2 * MiB)
    h = om.connect(res['export_uri'])
    assert om.read_all(h, origin.size) == origin.content
    om.close(h)
    dst.assert_alive()


@pytest.mark.scripted_peer
@pytest.mark.parametrize('bad', ('longer than the cache', 'partial entry'))
def test_bad_ordering_list(make_agent, make_origin, bad):
    """firepan's destination offers the ordering list, within bounds.

    Its WELCOME says "order": true; an ordering LIST longer than the
    volume's cache (512 blocks) or of a partial entry ends the stream, and
    the agent goes on.
    """
    dst = make_agent(name='dst').start()
    origin = make_origin(4 * MiB)
    inc, s = fake_source(dst, origin, strategy='firepan')
    assert json.loads(inc['welcome'].decode()).get('order') is True, \
        inc['welcome']
    mid = inc['migration_id']
    mu.wait_state(dst, mid, ('connected',), timeout=5)
    payload = (struct.pack('<513Q', *range(513)) if bad.startswith('longer')
               else b'\0' * 12)
    try:
        s.sendall(mu.frame(mu.T_LIST, payload, flags=F_ORDER))
        st = mu.wait_state(dst, mid, ('failed',), timeout=15)
    finally:
        s.close()
    assert 'transfer stream from the source lost' in st.get('error', ''), st
    assert 'ordering LIST' in dst.run_log(), dst.run_log()[-2000:]
    dst.client().call('migration-abort', migration_id=mid)
    assert mu.volume_gone(dst, 'vol1')
    dst.assert_alive()


@pytest.mark.timeout(60)
@pytest.mark.parametrize('client', ('connected', 'gone'))
def test_agent_stops_with_a_request_held_at_the_gate(make_agent,
                                                     make_origin, client):
    """SIGTERM while a destination request waits for the switchover."""
    dst = make_agent(name='dst').start()
    origin = make_origin(4 * MiB)
    inc = mu.incoming_only(dst, 'vol1', origin.uri, 2 * MiB, 'read_only')
    h = om.connect(inc['export_uri'])
    pending, _ = mu.gated_write(h, 0, origin.content[:BS])
    assert pending
    if client == 'gone':
        # The VM process dies; its request stays held (dropping the last
        # reference closes the socket without NBD_CMD_DISC).
        del h
        gc.collect()
    t0 = time.monotonic()
    try:
        rc = dst.stop(timeout=20, check=False)
    except AssertionError as exc:
        raise AssertionError(
            'the destination agent did not exit within 20 s of SIGTERM '
            'while a request of an incoming migration (prepared, never '
            'switched) waited at the gate (client %s): %s' % (
                client, str(exc)[:1500]))
    assert rc == 0, (rc, dst.run_log()[-2000:])
    assert time.monotonic() - t0 < 20


@pytest.mark.scripted_peer
def test_fake_source_ignoring_credit(make_agent, make_origin):
    """More background blocks than credits: the stream ends, cleanly."""
    dst = make_agent(name='dst').start()
    origin = make_origin(4 * MiB)
    inc, s = fake_source(dst, origin)
    mid = inc['migration_id']
    s.sendall(mu.frame(mu.T_SWITCH, b'{}'))
    data = bytes(BS)
    try:
        # 64 blocks a frame, as fast as the socket takes them: 4 x the
        # 256 credits of the WELCOME.
        for first in range(0, 1024, 64):
            s.sendall(mu.frame(mu.T_BLOCK, b''.join(
                struct.pack('<Q', ob) + data
                for ob in range(first, first + 64))))
        s.sendall(mu.frame(mu.T_DONE))
    except (BrokenPipeError, ConnectionResetError):
        pass
    st = mu.wait_state(dst, mid, ('failed', 'completed'), timeout=15)
    s.close()
    # The receiver either kept up (credit came back in time) or ended the
    # stream; it never queues without bound nor crashes.
    if st['state'] == 'failed':
        assert 'Protocol error' in st['error'] or 'lost' in st['error'], st
        dst.client().call('migration-abort', migration_id=mid)
    else:
        dst.detach('vol1')
    dst.assert_alive()


# ---------------------------------------------------------------------------
# Failures in the middle of a copy
# ---------------------------------------------------------------------------

def migrate_until_copying(make_agent, make_origin, strategy, link=None,
                          rate_mbps=1):
    """A warmed write_back volume, migrating, the VM on the destination.

    Returns once the background copy has moved some blocks (and has many
    left): (src, dst, origin, orc, vm, mid).  At 1 MB/s the 8 MiB copy
    lasts about 8 s, in frames of up to 1 MiB: long enough for the caller
    to pause and check the VM and still fail the copy half-way on a busy
    machine.
    """
    # A lazy write-back: dirty blocks all over the disk, most of them
    # outside the VM's working region and older than it in the LRU, so
    # the hottest-first copy leaves many for last.
    src, dst, origin, orc, vm, uri = mu.setup_source(
        make_agent, make_origin, 'write_back',
        src_extra={'writeback_interval_ms': 60000, 'dirty_high_percent': 95})
    vm.run_for(0.5)
    vm.wl.assert_clean()
    s, d = src.client(), dst.client()
    if link is not None:
        p = link(src, dst)
    else:
        p = migration.prepare(s, d, 'vol1', strategy,
                              rate_limit_mbps=rate_mbps)
    mid = p['migration_id']
    migration.start(s, d, mid)
    dirty = src.show('vol1')['dirty_blocks']
    assert dirty > 0, src.show('vol1')
    vm.move(p['export_uri'])
    vm.resume()
    migration.switchover(s, d, mid)
    st = mu.wait_state(dst, mid, ('switched', 'completed', 'failed'))
    assert st['state'] == 'switched', st
    harness.wait_for(lambda: mu.status(src, mid)['blocks_done'] > 300, 30,
                     'the background copy to get going')
    st = mu.status(src, mid)
    assert st['blocks_done'] < st['blocks_total'] * 0.7, st
    return src, dst, origin, orc, vm, mid


def check_destination_after_loss(dst, orc, vm, mid, size):
    """No stale read: each block is the oracle's, or EIO if dirty remote.

    The VM was checked clean just before the fault and is still running.
    """
    st = mu.wait_state(dst, mid, ('failed',), timeout=20)
    assert 'lost' in st.get('error', ''), st
    # The VM goes on: failures are tolerated (blocks dirty only on the
    # source), wrong data never.
    if vm.running:
        time.sleep(1.0)
        vm.pause()
    else:
        vm.run_for(1.0)
    st = mu.status(dst, mid)
    h = om.connect(vm.uri, name='scan')
    mism, errs, bad = mu.scan_blocks(h, size, orc)
    om.close(h)
    problems = []
    if vm.wl.mismatches:
        problems.append('the VM read stale or wrong data after the source '
                        'was lost: %s; first: %s' % (
                            vm.wl.summary(), vm.wl.mismatches[:3]))
    if mism:
        problems.append('a scan of every block read %d stale or wrong '
                        'blocks, first: %s' % (len(mism), mism[:3]))
    if set(errs) - {errno.EIO}:
        problems.append('errors other than EIO: %s' % errs)
    if len(bad) != st['remote_dirty_blocks']:
        problems.append('%d blocks fail with EIO but the destination says '
                        '%d are dirty only on the source' % (
                            len(bad), st['remote_dirty_blocks']))
    assert not problems, '\n'.join(problems + [
        'destination status: %s' % st,
        'destination log:\n%s' % mu.log_excerpt(dst, 'migration|dirty', 8)])
    return st, bad


def check_nothing_lost(src, dst, origin, orc, vm):
    """After a migration failed past its switchover, both sides hold on.

    The source's dirty blocks may be older than what the VM wrote on the
    destination, and the destination may lack blocks only the source has:
    neither side may write back, drop or serve them on its own.  So:
    detaching is refused on both sides with a message that names the
    migration, the source keeps its dirty blocks, the origin is never
    overwritten with an old copy, and every read on the destination
    returns the oracle's data or fails -- never stale data, until the
    migration is settled (:func:`check_settles`).
    """
    om.close(vm.h)
    src_left = src.show('vol1')
    assert src_left['dirty_blocks'] > 0, src_left
    for agent in (src, dst):
        if mu.volume_gone(agent, 'vol1'):
            continue
        with pytest.raises(exception.AgentError) as ei:
            agent.client().detach_volume('vol1')
        assert 'unfinished live migration' in str(ei.value), ei.value
        assert ei.value.errno == errno.EBUSY
    assert src.show('vol1')['dirty_blocks'] == src_left['dirty_blocks']
    if not mu.volume_gone(dst, 'vol1') and dst.show('vol1')['export_uri']:
        h = om.connect(dst.show('vol1')['export_uri'], name='after-failure')
        mism, errs, bad = mu.scan_blocks(h, VOLUME_SIZE, orc)
        om.close(h)
        assert not mism, ('stale data served after the failed migration: '
                          '%s' % mism[:5])


def check_settles(src, dst, origin, orc, mid, mode, listed=None):
    """``settle`` gives the volume back to the destination, whole.

    The source lets go of it, the destination serves every block with the
    last acknowledged data (no EIO left), the VM goes on, and once the
    destination is detached the origin holds exactly the oracle's data:
    no dirty block was lost and no stale one written back over a newer.
    """
    res = migration.settle(src.client(), dst.client(), mid, 'vol1')
    assert res['mode'] == mode, res
    assert res['given_up_blocks'] == 0, res
    if listed is not None:
        assert res['blocks'] == listed, res
    assert mu.volume_gone(src, 'vol1'), src.client().list_volumes()
    if mode == 'missing':
        assert mu.status(dst, mid)['state'] == 'settled'
    mu.assert_settled_volume_serves(dst, orc, res)
    dst.detach('vol1')
    assert not om.compare(orc, origin.read_file(), 'origin')
    return res


@pytest.mark.timeout(120)
def test_failed_partial_write_leaves_its_whole_blocks_on_the_source(
        make_agent, make_origin):
    """A write the lost source makes fail changes none of its blocks.

    The write covers one block whole and the next in part, both dirty only
    on the lost source.  The part cannot be written (the rest of its block
    is gone with the source), so the write fails; the whole block must
    still be the source's then, unreadable (EIO), not the origin's stale
    copy.  (Once the whole block was marked superseded before the partial
    one failed: a read of it returned the origin's data.)
    """
    src, dst, origin, orc, vm, mid = migrate_until_copying(
        make_agent, make_origin, 'hybrid')
    vm.pause()
    src.kill()
    mu.wait_state(dst, mid, ('failed',), timeout=20)
    h = om.connect(vm.uri, name='probe')
    _, _, bad = mu.scan_blocks(h, VOLUME_SIZE, orc)
    pairs = [b for b in bad if b + 1 in set(bad)]
    assert pairs, 'no two adjacent blocks dirty only on the lost source'
    b = pairs[len(pairs) // 2]
    with pytest.raises(nbd.Error) as e:
        h.pwrite(b'\x5a' * (BS + 512), b * BS)
    assert e.value.errno == 'EIO', e.value
    for blk in (b, b + 1):
        with pytest.raises(nbd.Error) as e:
            h.pread(BS, blk * BS)
        assert e.value.errno == 'EIO', (blk, e.value)
    assert mu.status(dst, mid)['remote_dirty_blocks'] == len(bad)
    om.close(h)


@pytest.mark.timeout(120)
@pytest.mark.parametrize('strategy', ('hybrid', 'cloudcache', 'firepan_if'))
def test_source_killed_during_copy(make_agent, make_origin, strategy):
    src, dst, origin, orc, vm, mid = migrate_until_copying(
        make_agent, make_origin, strategy)
    vm.pause()
    vm.wl.assert_clean()
    src_dirty = src.show('vol1')['dirty_blocks']
    vm.wl.tolerate_errors = True
    vm.resume()
    src.kill()
    st, bad = check_destination_after_loss(dst, orc, vm, mid, VOLUME_SIZE)
    print('%s: %s; %d blocks unreadable, source had %d dirty' % (
        strategy, st['error'], len(bad), src_dirty))
    if strategy == 'firepan_if':
        # Everything was flushed at the switchover: nothing is unreadable.
        assert not bad, st
    else:
        assert st['remote_dirty_blocks'] > 0, st
        assert 'dirty blocks still on the source' in st['error'], st
    dst.assert_alive()
    # The source restarts after its crash: its dirty blocks are back.
    src.start()
    back = src.show('vol1')
    assert back['dirty_blocks'] >= len(bad), (back, len(bad))


@pytest.mark.timeout(120)
def test_source_restarted_after_kill_loses_nothing(make_agent, make_origin):
    src, dst, origin, orc, vm, mid = migrate_until_copying(
        make_agent, make_origin, 'hybrid')
    vm.pause()
    vm.wl.assert_clean()
    vm.wl.tolerate_errors = True
    vm.resume()
    src.kill()
    mu.wait_state(dst, mid, ('failed',), timeout=20)
    time.sleep(1.0)
    vm.pause()
    src.start()
    back = src.show('vol1')
    assert back['dirty_blocks'] > 0, back
    # Restarted, the source neither serves nor writes back the volume.
    assert back['state'] == 'unavailable', back
    assert 'did not complete' in back.get('error', ''), back
    listed = mu.status(dst, mid)['remote_dirty_blocks']
    check_nothing_lost(src, dst, origin, orc, vm)
    check_settles(src, dst, origin, orc, mid, 'missing', listed)


@pytest.mark.timeout(120)
def test_destination_killed_during_copy(make_agent, make_origin):
    src, dst, origin, orc, vm, mid = migrate_until_copying(
        make_agent, make_origin, 'hybrid')
    vm.wl.disconnect_expected.set()
    dst.kill()
    st = mu.wait_state(src, mid, ('failed',), timeout=20)
    assert 'lost' in st.get('error', '') or 'failed' in st.get('error', ''), st
    print(st['error'])
    vm.pause()
    src.assert_alive()
    # The source kept every block the destination had not acknowledged,
    # and refuses the VM's writes (the VM runs on the destination).
    left = src.show('vol1')
    assert left['dirty_blocks'] > 0, left
    h = om.connect(src.show('vol1')['export_uri'])
    assert mu.write_errno(h, WORK[0]) == errno.EPERM
    om.close(h)
    with pytest.raises(exception.AgentError) as ei:
        src.client().call('migration-finish', migration_id=mid, timeout_s=1)
    assert 'failed' in str(ei.value), ei.value
    # The destination host comes back: what it acknowledged is there; what
    # it did not is still dirty on the source.  Neither may serve stale
    # data: blocks only the source holds must not come from the origin.
    dst.start()
    res = dst.show('vol1')
    # Restarted mid-migration, the destination cannot know which blocks
    # only the source holds: it does not serve the volume at all (no
    # stale data), and keeps what it acknowledged.
    assert res['state'] == 'unavailable', res
    assert not res['export_uri'], res
    assert 'did not complete' in res.get('error', ''), res
    check_nothing_lost(src, dst, origin, orc, vm)
    # Settling: the destination lists what it holds dirty (newer than the
    # source's copies), the source writes back the rest.
    check_settles(src, dst, origin, orc, mid, 'held')


def proxied_prepare(proxies, strategy, rate_mbps=2):
    def link(src, dst):
        inc = mu.incoming_only(dst, 'vol1', src.show('vol1')['origin'],
                               VOLUME_CACHE, 'write_back', strategy=strategy,
                               src=src)
        proxy = mu.TcpProxy(inc['listen'])
        proxies.append(proxy)
        mu.outgoing_only(src, inc, 'vol1', strategy,
                         destination=proxy.address,
                         rate_limit_bps=rate_mbps * 1000 * 1000)
        return inc
    return link


@pytest.mark.timeout(120)
@pytest.mark.parametrize('strategy', ('hybrid', 'cloudcache'))
def test_link_cut_during_copy(make_agent, make_origin, strategy):
    proxies = []
    try:
        src, dst, origin, orc, vm, mid = migrate_until_copying(
            make_agent, make_origin, strategy,
            link=proxied_prepare(proxies, strategy))
        assert proxies[0].bytes > 0
        vm.pause()
        vm.wl.assert_clean()
        vm.wl.tolerate_errors = True
        vm.resume()
        proxies[0].cut()
        sst = mu.wait_state(src, mid, ('failed',), timeout=20)
        st, bad = check_destination_after_loss(dst, orc, vm, mid,
                                               VOLUME_SIZE)
        print('source: %s; destination: %s; %d blocks unreadable' % (
            sst['error'], st['error'], len(bad)))
        assert st['remote_dirty_blocks'] > 0, st
        src.assert_alive()
        dst.assert_alive()
        # The source still holds those dirty blocks; settling writes them
        # back and gives the volume to the destination alone.
        check_nothing_lost(src, dst, origin, orc, vm)
        check_settles(src, dst, origin, orc, mid, 'missing',
                      st['remote_dirty_blocks'])
    finally:
        for p in proxies:
            p.close()


@pytest.mark.timeout(60)
def test_link_cut_before_switchover_aborts_cleanly(make_agent, make_origin):
    """Cut after start, before switchover: abort gives the VM back."""
    src, dst, origin, orc, h = small_source(make_agent, make_origin)
    proxies = []
    try:
        inc = proxied_prepare(proxies, 'hybrid')(src, dst)
        mid = inc['migration_id']
        migration.start(src.client(), dst.client(), mid)
        proxies[0].cut()
        mu.wait_state(dst, mid, ('failed',), timeout=15)
        mu.wait_state(src, mid, ('failed',), timeout=15)
        with pytest.raises(exception.AgentError) as ei:
            migration.switchover(src.client(), dst.client(), mid)
        assert 'failed' in str(ei.value), ei.value
        migration.abort(src.client(), dst.client(), mid)
        assert mu.volume_gone(dst, 'vol1')
        wl = om.Workload(h, orc, seed=9)
        wl.run(nops=400)
        wl.assert_clean()
        assert not om.verify_all(h, orc)
    finally:
        for p in proxies:
            p.close()
    om.close(h)
    src.detach('vol1')
    assert not om.compare(orc, origin.read_file(), 'origin')


@pytest.mark.timeout(120)
def test_source_stopped_cleanly_during_copy(make_agent, make_origin):
    """SIGTERM on the source mid-copy: a clean exit, a clear failure."""
    src, dst, origin, orc, vm, mid = migrate_until_copying(
        make_agent, make_origin, 'hybrid')
    vm.pause()
    vm.wl.assert_clean()
    before = src.show('vol1')
    rc = src.stop(timeout=60, check=False)
    assert rc == 0, 'source exited with %s on SIGTERM mid-migration:\n%s' % (
        rc, src.run_log()[-3000:])
    st = mu.wait_state(dst, mid, ('failed',), timeout=20)
    assert 'source' in st['error'], st
    src.start()
    back = src.show('vol1')
    # A clean shutdown keeps the whole cache: the dirty blocks not yet
    # acknowledged by the destination (acks may have come in since
    # ``before``: the source forgets those), and every clean block.
    assert 0 < back['dirty_blocks'] <= before['dirty_blocks'], (before, back)
    assert (back['cached_blocks'] - back['dirty_blocks'] ==
            before['cached_blocks'] - before['dirty_blocks']), (before, back)
    om.close(vm.h)
    src.assert_alive()
    dst.assert_alive()


@pytest.mark.timeout(90)
@pytest.mark.parametrize('victim', ('source', 'destination'))
def test_failure_does_not_undo_destination_writes(make_agent, make_origin,
                                                  victim):
    """Blocks dirty on the source, rewritten by the VM on the destination.

    Until the migration completes the destination keeps the new data in
    its cache and does not write it back (the blocks are pinned): were it
    at the origin and gone from the destination's cache, a crash of the
    destination would leave no trace that the source's dirty copies are
    stale.  When either host dies and comes back, the source must not
    write back its old copies on its own, and settling must leave the
    new data at the origin.
    """
    src, dst = mu.agent_pair(make_agent, src_extra={
        'writeback_interval_ms': 60000, 'dirty_high_percent': 95})
    origin = make_origin(8 * MiB)
    with open(origin.path, 'rb') as f:
        before = f.read(16 * BS)
    res = src.attach('vol1', origin.uri, cache_size=4 * MiB,
                     write_policy='write_back')
    h = om.connect(res['export_uri'])
    old = b'\x11' * (16 * BS)
    h.pwrite(old, 0)                          # blocks 0-15: dirty, old
    data, errors = om.read_range(h, 2 * MiB, 6 * MiB)   # newer than them
    assert not errors
    om.close(h)
    assert src.show('vol1')['dirty_blocks'] == 16
    s, d = src.client(), dst.client()
    p = migration.prepare(s, d, 'vol1', 'hybrid', rate_limit_mbps=0.5)
    mid = p['migration_id']
    migration.start(s, d, mid)
    migration.switchover(s, d, mid)
    # The VM, on the destination, rewrites the 16 blocks at once (the
    # hottest-first copy is busy with the 1024 newer blocks).
    h = om.connect(p['export_uri'])
    new = b'\x22' * (16 * BS)
    h.pwrite(new, 0)
    h.flush()
    time.sleep(1.5)       # three of the destination's write-back intervals
    held = dst.show('vol1')
    assert held['dirty_blocks'] >= 16, held
    with open(origin.path, 'rb') as f:
        assert f.read(16 * BS) == before, (
            'the destination wrote back blocks the source still held dirty '
            'before the migration completed')
    st = mu.status(src, mid)
    assert st['state'] == 'switched' and st['blocks_done'] < 1000, st
    if victim == 'source':
        src.kill()
        mu.wait_state(dst, mid, ('failed',), timeout=20)
        assert h.pread(16 * BS, 0) == new
        src.start()
    else:
        dst.kill()
        mu.wait_state(src, mid, ('failed',), timeout=20)
        dst.start()
    om.close(h)
    left = src.show('vol1')
    assert left['dirty_blocks'] >= 16, left
    # The source refuses to let go (and so to write back) on its own.
    with pytest.raises(exception.AgentError) as ei:
        src.client().detach_volume('vol1')
    assert ei.value.errno == errno.EBUSY, ei.value
    with open(origin.path, 'rb') as f:
        assert f.read(16 * BS) == before
    res = migration.settle(s, d, mid, 'vol1')
    assert res['mode'] == ('missing' if victim == 'source' else 'held'), res
    assert mu.volume_gone(src, 'vol1')
    h = om.connect(dst.show('vol1')['export_uri'])
    assert h.pread(16 * BS, 0) == new
    om.close(h)
    dst.detach('vol1')
    with open(origin.path, 'rb') as f:
        at_origin = f.read(16 * BS)
    assert at_origin == new, (
        'after settling (%s) the origin holds %s.. for blocks 0-15, expected '
        'the data the VM wrote on the destination %s..' % (
            res, at_origin[:8].hex(), new[:8].hex()))
