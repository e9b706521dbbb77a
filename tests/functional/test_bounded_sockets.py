# SPDX-License-Identifier: Apache-2.0
"""Bounded resources on the sockets a local client controls.

NBD exports: a client that stops reading its replies pins at most the
per-connection cap (32 MiB) of agent memory and is dropped after the send
timeout (export_send_timeout_s, 30 s by default, 5 s here) while another
client of the same export keeps working; connections beyond the
per-export cap (16) are refused while the VM's works; a handshake must
finish within 10 s however slowly it trickles.  Control socket: a
connection without a complete request is closed after
control_idle_timeout_s (30 s by default, 4 s here).  An established, idle
NBD connection is never timed out (an idle VM disk is normal): the VM's
connection in these tests idles past every timeout and is checked
afterwards.
"""

import json
import socket
import struct
import threading
import time

import pytest

from fcache_testkit import harness
from fcache_testkit import oracle as om

from . import test_bad_nbd_input as bad_nbd

MiB = 1 << 20
INFLIGHT_CAP = 32 * MiB
SEND_TIMEOUT_S = 5
HANDSHAKE_S = 10
MAX_CONNS = 16
CONTROL_IDLE_S = 4


def rss(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    raise AssertionError('no VmRSS')


@pytest.fixture
def served(make_agent, make_origin):
    # Eight workers per connection: without a cap, a slow reader's eight
    # 32 MiB reads pin 256 MiB.
    agent = make_agent(cache_size='40M', nbd_threads=8,
                       export_send_timeout_s=SEND_TIMEOUT_S).start()
    origin = make_origin(40 * MiB, nbd=False)
    uri = agent.attach('vol', origin.path, cache_size=36 * MiB)['export_uri']
    return agent, origin, uri


def check_vm(h, origin, span=4 * MiB):
    oracle = om.Oracle(origin.content)
    for off in range(0, span, MiB):
        assert oracle.check(off, h.pread(MiB, off)) is None


@pytest.mark.timeout(180)
def test_slow_reader_is_capped_then_dropped(served):
    agent, origin, uri = served
    vm = om.connect(uri, strict=False)
    # Warm the cache over the range the slow reader asks for.
    check_vm(vm, origin, span=32 * MiB)
    time.sleep(0.5)
    base = rss(agent.pid)

    slow = bad_nbd.RawClient(uri, timeout=60).handshake()
    slow.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    for i in range(24):
        slow.request(bad_nbd.CMD_READ, 0, 32 * MiB, cookie=i + 1)
    t0 = time.monotonic()
    peak = base
    dropped_at = None
    log_line = 'did not read its replies for %d s' % SEND_TIMEOUT_S
    # The VM's client keeps working all along.
    while time.monotonic() - t0 < SEND_TIMEOUT_S + 15:
        peak = max(peak, rss(agent.pid))
        check_vm(vm, origin, span=2 * MiB)
        if log_line in agent.log():
            dropped_at = time.monotonic() - t0
            break
        time.sleep(0.5)
    growth = peak - base
    assert growth < INFLIGHT_CAP + 24 * MiB, \
        'a slow reader grew the agent by %d MiB' % (growth // MiB)
    assert dropped_at is not None, 'the slow reader was never dropped'
    assert SEND_TIMEOUT_S - 2 <= dropped_at <= SEND_TIMEOUT_S + 12, dropped_at
    # Dropped: what the socket still holds, then the end.
    assert bad_nbd.closed_by_peer(slow.s, timeout=10)
    slow.close()
    check_vm(vm, origin)
    om.close(vm)
    agent.assert_alive()


def test_connections_beyond_the_cap_are_refused(served):
    agent, origin, uri = served
    vm = om.connect(uri, strict=False)
    others = [bad_nbd.RawClient(uri).handshake()
              for _ in range(MAX_CONNS - 1)]
    extra = bad_nbd.RawClient(uri)
    # Accepted by the kernel, then closed by the agent before any greeting.
    assert bad_nbd.closed_by_peer(extra.s, timeout=10)
    extra.close()
    assert 'refusing another' in agent.log()
    check_vm(vm, origin)
    # A slot freed is a slot usable again.
    others.pop().close()

    def reconnect():
        try:
            others.append(bad_nbd.RawClient(uri).handshake())
            return True
        except (EOFError, OSError):
            return False
    harness.wait_for(reconnect, 10, 'a connection after one closed')
    for c in others:
        c.close()
    check_vm(vm, origin)
    om.close(vm)


def test_dripped_handshake_is_cut_at_its_deadline(served):
    agent, origin, uri = served
    vm = om.connect(uri, strict=False)
    c = bad_nbd.RawClient(uri, timeout=5)
    c.greeting()
    t0 = time.monotonic()
    # Client flags, then an option header, one byte a second: every recv
    # makes progress, so only a deadline for the whole handshake ends it.
    data = struct.pack('>I', 3) + struct.pack('>QII', 0x49484156454F5054,
                                              7, 6)
    closed = False
    for b in data:
        try:
            c.s.sendall(bytes([b]))
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        if bad_nbd.closed_by_peer(c.s, timeout=1):
            closed = True
            break
    elapsed = time.monotonic() - t0
    assert closed, 'a dripping client outlived the handshake deadline'
    assert HANDSHAKE_S - 1 <= elapsed <= HANDSHAKE_S + 3, elapsed
    assert 'did not finish its handshake within 10 s' in agent.log()
    c.close()
    # The VM's established connection idled through all of it.
    check_vm(vm, origin)
    om.close(vm)


@pytest.mark.timeout(180)
def test_idle_control_connection_is_closed(make_agent):
    agent = make_agent(control_idle_timeout_s=CONTROL_IDLE_S).start()
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    partial = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    served_then_idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for s in (silent, partial, served_then_idle):
        s.settimeout(CONTROL_IDLE_S + 15)
        s.connect(agent.control_socket)
    t0 = time.monotonic()
    partial.sendall(b'{"op": "agent-st')
    served_then_idle.sendall(b'{"op": "agent-status"}\n')
    first = b''
    while not first.endswith(b'\n'):
        first += served_then_idle.recv(65536)
    assert json.loads(first)['ok']
    results = {}

    def wait_close(name, s):
        buf = b''
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                chunk = b''
            if not chunk:
                break
            buf += chunk
        results[name] = (time.monotonic() - t0, buf)
    threads = [threading.Thread(target=wait_close, args=a) for a in (
        ('silent', silent), ('partial', partial),
        ('served_then_idle', served_then_idle))]
    for t in threads:
        t.start()
    # Others are served meanwhile.
    time.sleep(1)
    assert agent.status()['volumes'] == []
    for t in threads:
        t.join(CONTROL_IDLE_S + 20)
    for name in ('silent', 'partial', 'served_then_idle'):
        elapsed, buf = results[name]
        assert CONTROL_IDLE_S - 1 <= elapsed <= CONTROL_IDLE_S + 5, \
            (name, elapsed)
        reply = json.loads(buf.decode().strip().splitlines()[-1])
        assert not reply['ok'] and 'no complete request within %d s' % (
            CONTROL_IDLE_S) in reply['error'], (name, reply)
    for s in (silent, partial, served_then_idle):
        s.close()
    agent.assert_alive()
