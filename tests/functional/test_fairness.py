# SPDX-License-Identifier: Apache-2.0
"""Fairness: what other local users hold cannot keep the agent's masters out.

Control socket: other users (here eight throwaway uids in
``control_group``, run with setpriv) that open connection after
connection, and keep each one busy with cheap requests or with requests
the agent refuses (EPERM), get at most 4 connections each and at most 24
in all; the other 8 of the 32 are kept for root and
``control_admin_group`` (nova-compute), whose requests are answered at
once throughout.  A refused request closes its connection, and other
users' requests do not extend their connection past
``control_idle_timeout_s``.

Migration listener: 8 migrations at once between the same two agents,
back and forth for 6 rounds, all complete (concurrent ``migration-key``
calls used to drop each other's keys); idle connections held from eight
other local addresses, reconnected as soon as they are cut, do not make
any of them fail: a source whose stream the full listener shuts before
its TLS handshake tries again.

NBD export: a connection that leaves two 32 MiB replies unread, or reads
its replies slowly, does not delay the reads of the VM's connection (the
replies of reads that end on the origin's thread used to be sent there).
"""

import os
import select
import socket
import subprocess
import sys
import threading
import time

import pytest

from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

from . import test_bad_nbd_input as bad_nbd

CONTROL_IDLE_S = 3
ATTACK_UIDS = range(65526, 65534)   # eight uids, all in group nogroup
READERS = 'nogroup'
MiB = 1 << 20
# Rounds of 8 concurrent migrations between the same two agents.
ROUNDS = 6
# export_send_timeout_s here.
SEND_TIMEOUT_S = 6

# Opens `per_uid` connections and keeps each one in use, reconnecting
# whenever the agent closes one, until killed.
HOG = r'''
import socket, sys, time
path, per_uid, op = sys.argv[1], int(sys.argv[2]), sys.argv[3]
req = ('{"op": "%s", "args": {"volume_id": "x"}}\n' % op).encode()
socks = [None] * per_uid
while True:
    for i in range(per_uid):
        s = socks[i]
        try:
            if s is None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(1)
                s.connect(path)
                socks[i] = s
            s.sendall(req)
            if not s.recv(65536):
                raise OSError('closed')
        except OSError:
            if s is not None:
                s.close()
            socks[i] = None
    time.sleep(0.2)
'''


@pytest.mark.timeout(120)
def test_other_users_cannot_keep_admins_out(make_agent, workdir):
    agent = make_agent(control_group=READERS,
                       control_idle_timeout_s=CONTROL_IDLE_S)
    for d in (workdir, agent.dir):
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o711)
    agent.start()
    script = os.path.join(workdir, 'hog.py')
    with open(script, 'w') as f:
        f.write(HOG)
    os.chmod(script, 0o644)
    hogs = []
    try:
        for i, uid in enumerate(ATTACK_UIDS):
            # Half are readers asking what they may (agent-status), half
            # ask what they may not (volume-detach: EPERM).
            op = 'agent-status' if i % 2 else 'volume-detach'
            hogs.append(subprocess.Popen(
                ['setpriv', '--reuid', str(uid), '--regid', READERS,
                 '--clear-groups', sys.executable, script,
                 agent.control_socket, '6', op],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # Past the idle timeout: a connection kept alive by requests would
        # now be past its deadline and still held.
        time.sleep(CONTROL_IDLE_S + 1)
        for _ in range(5):
            assert all(h.poll() is None for h in hogs), 'a hog died'
            t0 = time.monotonic()
            # A client timeout short enough that retrying "busy" until a
            # slot frees up is a failure.
            assert agent.client(timeout=2).status() is not None
            assert time.monotonic() - t0 < 2
            time.sleep(0.5)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    log = agent.log()
    assert 'limit 4 per user' in log, log[-2000:]
    # A refusal is a warning that names the volume asked about.
    refused = [ln for ln in log.splitlines()
               if "refused 'volume-detach'" in ln]
    assert refused
    assert all("WARNING: control: refused 'volume-detach' of volume x to pid "
               in ln for ln in refused), refused[:3]


# ---------------------------------------------------------------------------
# Migration listener
# ---------------------------------------------------------------------------

def migrate_all(src, dst, volumes, strategy='hybrid'):
    """Migrates ``volumes`` from src to dst at once; returns the errors.

    As Nova does with max_concurrent_live_migrations = 8: each prepared,
    started, switched and finished in a thread of its own.
    """
    errors = []

    def one(vid):
        try:
            s, d = src.client(timeout=60), dst.client(timeout=60)
            p = migration.prepare(s, d, vid, strategy)
            migration.start(s, d, p['migration_id'])
            migration.switchover(s, d, p['migration_id'])
            res = migration.finish(s, d, p['migration_id'], timeout_s=60)
            if res.get('state') != 'completed':
                errors.append((vid, res))
        except Exception as exc:
            errors.append((vid, repr(exc)))
    threads = [threading.Thread(target=one, args=(v,)) for v in volumes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


def eight_volumes(make_agent, make_origin):
    """Two agents, and eight small volumes on the first."""
    src, dst = mu.agent_pair(make_agent, cache_size='16M')
    volumes = ['v%d' % i for i in range(8)]
    for vid in volumes:
        origin = make_origin(2 * MiB)
        src.attach(vid, origin.uri, cache_size=MiB)
    return src, dst, volumes


@pytest.mark.timeout(240)
def test_eight_concurrent_migrations_between_two_hosts(make_agent,
                                                       make_origin):
    src, dst, volumes = eight_volumes(make_agent, make_origin)
    # Back and forth: every round is 8 at once between the same two.
    for rnd in range(ROUNDS):
        a, b = (src, dst) if rnd % 2 == 0 else (dst, src)
        errors = migrate_all(a, b, volumes)
        assert not errors, (rnd, errors, mu.log_excerpt(b))


class ListenerHog(object):
    """Idle connections to a migration listener from many local addresses.

    ``per_address`` connections from each of 127.0.0.2 and up, each
    reconnected as soon as the agent closes it, until :meth:`stop`.
    """

    def __init__(self, hostport, addresses=8, per_address=16):
        host, port = hostport.rsplit(':', 1)
        self.target = (host, int(port))
        self.sources = ['127.0.0.%d' % (2 + i) for i in range(addresses)]
        self.per_address = per_address
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self, source):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind((source, 0))
        s.connect_ex(self.target)
        return s

    def _alive(self, entry):
        """Whether a connection is to be kept: idle, or connecting still.

        A connect that the listener's full backlog left pending for 0.3 s
        is started again rather than left to the SYN's backoff.
        """
        s, since, connected = entry
        if not connected:
            if not select.select([], [s], [], 0)[1]:
                return time.monotonic() - since < 0.3
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                return False
            entry[2] = True
        if not select.select([s], [], [], 0)[0]:
            return True
        try:
            return s.recv(1) != b''
        except BlockingIOError:
            return True
        except OSError:
            return False

    def _run(self):
        socks = {}
        while not self.done.is_set():
            for src in self.sources:
                for i in range(self.per_address):
                    entry = socks.get((src, i))
                    if entry is not None and self._alive(entry):
                        continue
                    if entry is not None:
                        entry[0].close()
                    socks[(src, i)] = [self._connect(src), time.monotonic(),
                                       False]
            time.sleep(0.05)
        for entry in socks.values():
            entry[0].close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(10)


@pytest.mark.timeout(240)
def test_idle_connections_cannot_keep_sources_out(make_agent, make_origin):
    src, dst, volumes = eight_volumes(make_agent, make_origin)
    with ListenerHog(dst.settings['migration_listen']):
        # Every slot the hog can take, taken: the listener refuses more.
        harness.wait_for(lambda: 'too many handshakes' in dst.log(), 20,
                         'the idle connections to fill the listener')
        time.sleep(1)
        for rnd in range(2):
            errors = migrate_all(src, dst, volumes)
            assert not errors, (rnd, errors, mu.log_excerpt(dst))
            # Back outside the siege, so that the next round runs again.
            errors = migrate_all(dst, src, volumes)
            assert not errors, (rnd, errors)
    assert 'named no prepared migration' in dst.log()


@pytest.mark.timeout(120)
def test_a_source_tries_again_while_the_listener_is_full(make_agent,
                                                         make_origin):
    src, dst = mu.agent_pair(make_agent, cache_size='16M')
    origin = make_origin(2 * MiB)
    src.attach('v0', origin.uri, cache_size=MiB)
    s, d = src.client(timeout=60), dst.client(timeout=60)
    vol = s.show_volume('v0')
    key = migration.prepare_key(s, 'v0')
    prepared = migration.prepare_destination(
        d, 'v0', 'hybrid', vol['origin'], vol['cache_size'],
        vol['write_policy'], migration.admission_params(vol)['admission'],
        key['migration_id'], source_fingerprint=key['fingerprint'])
    # The listener's refusal as the source sees it: a stream closed at once.
    proxy = mu.TcpProxy(prepared['destination'], refuse_first=3)
    try:
        prepared['destination'] = proxy.address
        migration.prepare_source(s, prepared)
        migration.start(s, d, key['migration_id'])
        migration.switchover(s, d, key['migration_id'])
        res = migration.finish(s, d, key['migration_id'], timeout_s=60)
    finally:
        proxy.close()
    assert res.get('state') == 'completed', (res, mu.log_excerpt(src))
    assert proxy.refused == 3
    assert src.log().count('(its listener is busy); trying again') == 3


# ---------------------------------------------------------------------------
# NBD export
# ---------------------------------------------------------------------------

@pytest.fixture
def cold_export(make_agent, make_origin):
    """An agent, the oracle and URI of its cold volume, and a raw client.

    The origin is an NBD server: its reads end on the origin's thread,
    shared by the export's connections.  The raw client (handshake done)
    takes its replies 4 KiB at a time at most.
    """
    agent = make_agent(cache_size='80M',
                       export_send_timeout_s=SEND_TIMEOUT_S).start()
    origin = make_origin(72 * MiB)
    uri = agent.attach('vol', origin.uri,
                       cache_size=72 * MiB)['export_uri']
    slow = bad_nbd.RawClient(uri, timeout=60)
    slow.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.handshake()
    return agent, om.Oracle(origin.content), uri, slow


@pytest.mark.timeout(120)
def test_unread_replies_do_not_delay_another_connection(cold_export):
    agent, oracle, uri, slow = cold_export
    vm = om.connect(uri, strict=False)
    # Two cold 32 MiB reads: their replies come from the origin's side,
    # and the client takes none of them.
    slow.request(bad_nbd.CMD_READ, 0, 32 * MiB, cookie=1)
    slow.request(bad_nbd.CMD_READ, 32 * MiB, 32 * MiB, cookie=2)
    time.sleep(1)
    # The VM's own cold reads meanwhile: at once, not after the send
    # timeout that drops the other connection.
    t0 = time.monotonic()
    for off in range(64 * MiB, 72 * MiB, MiB):
        assert oracle.check(off, vm.pread(MiB, off)) is None
    elapsed = time.monotonic() - t0
    assert elapsed < SEND_TIMEOUT_S / 2, elapsed
    log_line = 'did not read its replies for %d s' % SEND_TIMEOUT_S
    harness.wait_for(lambda: log_line in agent.log(), SEND_TIMEOUT_S + 10,
                     'the slow reader to be dropped')
    assert bad_nbd.closed_by_peer(slow.s, timeout=10)
    slow.close()
    for off in range(0, 8 * MiB, MiB):
        assert oracle.check(off, vm.pread(MiB, off)) is None
    om.close(vm)
    agent.assert_alive()


@pytest.mark.timeout(120)
def test_slow_reader_does_not_lock_a_new_connection_out(cold_export):
    agent, oracle, uri, slow = cold_export
    for i in range(4):
        slow.request(bad_nbd.CMD_READ, i * 8 * MiB, 8 * MiB, cookie=i + 1)
    stop = threading.Event()

    def drip():
        # Slow, but never so slow that the send timeout drops it.
        while not stop.is_set():
            try:
                slow.s.recv(4096)
            except OSError:
                return
            time.sleep(0.01)
    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    time.sleep(1)
    done = {}

    def vm_reads():
        vm = om.connect(uri, strict=False)
        for off in range(64 * MiB, 72 * MiB, MiB):
            done[off] = oracle.check(off, vm.pread(MiB, off))
        om.close(vm)
    t = threading.Thread(target=vm_reads, daemon=True)
    t.start()
    t.join(SEND_TIMEOUT_S / 2)
    alive, read_by_then = t.is_alive(), len(done)
    stop.set()
    slow.close()
    dripper.join(10)
    t.join(60)
    assert not alive, ('the VM waited for a slow reader: %d MiB read in '
                       '%.1f s' % (read_by_then, SEND_TIMEOUT_S / 2))
    assert list(done.values()) == [None] * 8, done
    agent.assert_alive()
