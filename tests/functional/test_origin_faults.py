# SPDX-License-Identifier: Apache-2.0
"""The asynchronous NBD origin client under faults.

The agent keeps many requests in flight on each origin connection (see
"The origin client" in doc/contributor/design.rst).  Whatever the origin
does -- fail requests (nbdkit's error filter), die with requests in flight,
stop answering -- every request of the VM is answered, with data or an error,
within a bound; what it reads agrees with the oracle; and once the origin
is back the agent reconnects by itself and the volume reads back exactly
what the oracle says, through the agent and in the origin's file.
"""

import os
import random
import signal
import socket
import threading
import time

import nbd
import pytest

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

from .conftest import attach_and_connect

MiB = 1 << 20
BS = 4096
VOLUME_SIZE = 16 * MiB
VOLUME_CACHE = 2 * MiB
POLICIES = ['read_only', 'write_through', 'write_back']
# The origin stall limit the stall test sets (origin_stall_timeout_s; 30 s
# by default).
STALL_S = 4


def check_origin_file(agent, origin, orc):
    """Detach (writing back what is dirty); the file must be the oracle."""
    agent.detach('vol1')
    mism = om.compare(orc, origin.read_file(), 'origin file')
    assert not mism, mism


def wait_reconnected(agent, connections, timeout=20):
    def done():
        return agent.log().count('re-established') >= connections
    harness.wait_for(done, timeout, '%d origin connection(s) to be '
                     're-established' % connections)


@pytest.mark.parametrize('policy', POLICIES)
def test_origin_errors(make_agent, make_origin, workdir, policy):
    """A fifth of the origin's requests fail.

    Errors reach the VM, never stale data, and nothing is lost once the
    origin is healthy.
    """
    flag = os.path.join(workdir, 'inject-errors')
    open(flag, 'w').close()
    origin = make_origin(VOLUME_SIZE, filters=['error'],
                         filter_args=['error-rate=20%', 'error-file=' + flag])
    agent = make_agent(cache_size='8M', writeback_interval_ms=50).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=31, depth=32, tolerate_errors=True)
    wl.run(nops=3000, timeout=90)
    print(wl.summary())
    assert not wl.inflight
    wl.assert_clean()
    assert wl.failed > 20, wl.summary()

    os.unlink(flag)
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)
    agent.assert_alive()
    check_origin_file(agent, origin, orc)


@pytest.mark.parametrize('policy', POLICIES)
def test_origin_killed_mid_flight(make_agent, make_origin, policy):
    """SIGKILL the origin under a queue depth of 32, restart it 1.5 s later.

    The requests in flight fail, the agent reconnects, the workload goes
    on, and the data is the oracle's.
    """
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(cache_size='8M', writeback_interval_ms=50,
                       origin_connections=2).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=41, depth=32, tolerate_errors=True)
    result = {}

    def run():
        start = time.monotonic()
        try:
            wl.run(duration=7, timeout=60)
        finally:
            result['took'] = time.monotonic() - start

    # The workload runs in a thread: nbdkit is restarted from this one,
    # since --exit-with-parent ends it with the thread that started it.
    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.0)
    reads = agent.show('vol1')['origin_read_bytes']
    origin.server.proc.kill()
    origin.server.proc.wait(10)
    time.sleep(1.5)
    origin.server.start()
    t.join(60)
    assert not t.is_alive(), 'requests hung'
    took = result['took']
    print(wl.summary(), 'in %.1f s' % took)
    assert not wl.inflight
    assert took < 20, 'requests hung: the run took %.1f s' % took
    wl.assert_clean()
    if policy != 'write_back':
        # Misses and writes go to the origin at once: some failed.
        assert wl.failed > 0, wl.summary()

    wait_reconnected(agent, 2)
    assert agent.show('vol1')['origin_read_bytes'] > reads
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)
    agent.assert_alive()
    check_origin_file(agent, origin, orc)


@pytest.mark.parametrize('connections', [1, 2])
@pytest.mark.parametrize('policy', POLICIES)
def test_origin_restart_loses_no_acknowledged_write(make_agent, make_origin,
                                                    policy, connections):
    """The origin keeps acknowledged writes in memory until a flush, and dies.

    nbdkit's cache filter (cache=writeback) is a server with a volatile
    write cache: killed, it loses every write no flush covered, and after
    its restart a flush succeeds on the new connection.  The agent must
    write again what it was told was written (or fail the flush): the
    VM's FLUSH succeeds only once the origin holds every acknowledged
    write, and the origin's file is then the oracle.
    """
    origin = make_origin(VOLUME_SIZE, filters=['cache'],
                         filter_args=['cache=writeback'])
    # No write-back meanwhile (its own flush would cover what went before).
    agent = make_agent(cache_size='8M', writeback_interval_ms=3600000,
                       dirty_high_percent=100,
                       origin_connections=connections).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy)
    orc = om.Oracle(origin.content)
    # Whole blocks and parts of blocks: under write_back a part of a block
    # that is not cached goes around the cache, straight to the origin.
    rng = random.Random(connections * 10 + POLICIES.index(policy))
    for _ in range(200):
        length = rng.choice([BS, 2 * BS, 512, 1536])
        off = rng.randrange(0, VOLUME_SIZE - 2 * BS) // 512 * 512
        if length >= BS:
            off = off // BS * BS
        data = rng.randbytes(length)
        h.pwrite(data, off)
        orc.write(off, data)

    origin.server.proc.kill()
    origin.server.proc.wait(10)
    # The test can fail: the server really lost acknowledged writes.
    assert om.compare(orc, origin.read_file(), 'origin file after the kill')
    origin.server.start()
    wait_reconnected(agent, connections)

    h.flush()
    if policy != 'write_back':
        # What is dirty in the cache reaches the origin later, at the
        # write-back; everything else is there now.
        mism = om.compare(orc, origin.read_file(), 'origin file after FLUSH')
        assert not mism, mism
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)
    agent.assert_alive()
    check_origin_file(agent, origin, orc)
    assert 'wrote again' in agent.log()
    # The origin's lines name the volume it serves (journalctl -g vol1).
    origin_lines = [ln for ln in agent.log().splitlines()
                    if 'wrote again' in ln or 're-established' in ln or
                    ' lost (' in ln]
    assert origin_lines
    assert all('volume vol1: origin ' in ln for ln in origin_lines), \
        origin_lines


@pytest.mark.parametrize('how', ('attach', 'migration-incoming',
                                 'volume-move'))
def test_silent_origin_does_not_hold_the_control_plane(make_agent,
                                                       make_origin, workdir,
                                                       how):
    """An origin that accepts the connection and never says a word.

    The attach (or a live migration's destination preparing the volume,
    or a storage move to it) fails with a clear message once the
    handshake's deadline passes; meanwhile every other control request is
    answered at once, since the origin is opened without the lock they
    all take.
    """
    agent = make_agent(cache_size='4M').start()
    if how == 'volume-move':
        agent.attach('moving', make_origin(MiB).uri, cache_size=MiB)
    path = os.path.join(workdir, 'silent.sock')
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except socket.timeout:
                pass
    acceptor = threading.Thread(target=accept)
    acceptor.start()
    outcome = {}

    def attach():
        start = time.monotonic()
        try:
            if how == 'attach':
                agent.attach('silent', 'nbd+unix:///?socket=' + path,
                             cache_size=MiB)
            elif how == 'migration-incoming':
                mu.incoming_only(agent, 'silent',
                                 'nbd+unix:///?socket=' + path, MiB,
                                 'write_through')
            else:
                agent.client().call('volume-move', volume_id='moving',
                                    to='nbd+unix:///?socket=' + path)
            outcome['error'] = None
        except Exception as exc:
            outcome['error'] = exc
        outcome['took'] = time.monotonic() - start
    t = threading.Thread(target=attach)
    try:
        t.start()
        harness.wait_for(lambda: held, 5, 'the agent to connect')
        slowest = 0
        for _ in range(10):
            start = time.monotonic()
            agent.status()
            agent.client().list_volumes()
            slowest = max(slowest, time.monotonic() - start)
            time.sleep(0.2)
        assert slowest < 1, 'control requests waited %.1f s' % slowest
        t.join(30)
        assert not t.is_alive(), 'the attach never ended'
    finally:
        stop.set()
        acceptor.join()
        for c in held:
            c.close()
        listener.close()
    assert outcome['error'] is not None
    assert 'no answer to the NBD handshake' in str(outcome['error'])
    assert outcome['took'] < 15, outcome
    volumes = [v['volume_id'] for v in agent.status()['volumes']]
    assert volumes == (['moving'] if how == 'volume-move' else []), volumes


def test_reconnects_when_origin_returns(make_agent, make_origin):
    """Stopped origin: a miss fails at once; restarted: served again.

    No hang and no retry loop in the VM's request.
    """
    origin = make_origin(4 * MiB)
    agent = make_agent(cache_size='4M', origin_connections=2).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=MiB,
                              write_policy='write_through')
    assert h.pread(BS, 0) == origin.content[:BS]

    origin.server.stop()
    start = time.monotonic()
    with pytest.raises(nbd.Error):
        h.pread(BS, MiB)
    assert time.monotonic() - start < 5
    # Cached data is still served meanwhile.
    assert h.pread(BS, 0) == origin.content[:BS]

    origin.server.start()
    wait_reconnected(agent, 2)

    def served():
        try:
            return h.pread(BS, 2 * MiB) == origin.content[2 * MiB:2 * MiB + BS]
        except nbd.Error:
            return False
    harness.wait_for(served, 10, 'a miss to be served after the restart')
    orc = om.Oracle(origin.content)
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)
    assert 'connection 0 lost' in agent.log()


@pytest.mark.timeout(180)
def test_stalled_origin_fails_requests(make_agent, make_origin):
    """An origin that stops answering (SIGSTOP) must not hang the VM.

    After the stall limit its requests fail and the connection is replaced.
    """
    origin = make_origin(4 * MiB)
    agent = make_agent(cache_size='4M', origin_connections=1,
                       origin_stall_timeout_s=STALL_S).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=MiB,
                              write_policy='read_only')
    pid = origin.server.proc.pid
    harness.pause_process(pid)
    try:
        done = []
        buf = nbd.Buffer(BS)
        start = time.monotonic()
        h.aio_pread(buf, MiB, completion=lambda err: done.append(err.value)
                    or 1)
        while not done and time.monotonic() - start < STALL_S + 30:
            h.poll(1000)
        took = time.monotonic() - start
        assert done, 'the read hung for %.0f s' % took
        assert done[0] != 0, 'a read from a stopped origin succeeded'
        assert STALL_S - 1 < took < STALL_S + 15, took
    finally:
        os.kill(pid, signal.SIGCONT)
    assert 'no reply for %d s' % STALL_S in agent.log()
    wait_reconnected(agent, 1, timeout=30)
    assert h.pread(BS, MiB) == origin.content[MiB:MiB + BS]
    om.close(h)


@pytest.mark.parametrize('end', ['detach', 'stop'])
def test_reads_pending_when_the_export_goes(make_agent, make_origin, end):
    """Cold reads wait for a slow origin as the export goes away.

    The volume is detached, or the agent stopped.  A miss does not hold
    an NBD worker: it is pending until the origin's thread ends it
    (doc/contributor/design.rst, "A miss ends on the origin's thread").
    The export going away must wait for those ends, not free what they
    still use (the agent runs under ASan here), and must not hang; every
    read the client got an answer for carries the origin's data.
    """
    origin = make_origin(4 * MiB, filters=['delay'],
                         filter_args=['rdelay=1500ms'])
    agent = make_agent(cache_size='8M', origin_connections=2,
                       nbd_threads=2).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=4 * MiB,
                              write_policy='read_only')
    depth = 48                  # far more than the connection's workers
    bufs, ends = [], {}
    for i in range(depth):
        buf = nbd.Buffer(BS)
        bufs.append(buf)

        def ended(err, i=i):
            ends[i] = err.value
            return 1
        h.aio_pread(buf, i * 16 * BS, completion=ended)
    # Every read is on its way to the origin, none answered yet.
    harness.wait_for(lambda: h.aio_in_flight() == depth and not ends
                     and h.poll(0) is not None, 1, 'the reads to be sent')
    time.sleep(0.3)
    assert not ends, 'a cold read was answered before the origin was'

    start = time.monotonic()
    if end == 'detach':
        agent.detach('vol1')
    else:
        agent.stop()
    took = time.monotonic() - start
    # The origin answers after 1.5 s; the ends wait for it, not longer.
    assert took < 10, 'the %s took %.1f s' % (end, took)
    deadline = time.monotonic() + 10
    while len(ends) < depth and time.monotonic() < deadline:
        try:
            h.poll(100)
        except nbd.Error:
            break               # the agent closed the connection
    for i, err in ends.items():
        if err == 0:
            off = i * 16 * BS
            assert bufs[i].to_bytearray() == origin.content[off:off + BS]
    if end == 'detach':
        agent.assert_alive()
