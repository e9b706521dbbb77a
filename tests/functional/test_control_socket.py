# SPDX-License-Identifier: Apache-2.0
"""The control socket: bad requests get a clear error and change nothing.

Each test ends by checking that the agent still answers, that a volume
attached before (with data written through it) still serves that data, and
that nothing was attached, reserved or created by the refused request.
"""

import errno
import grp
import json
import os
import signal
import socket
import stat
import threading

import pytest

from nova_ext import exception

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

MiB = 1 << 20
BS = 4096


class Bystander(object):
    """A volume attached before the bad requests, with known data."""

    def __init__(self, agent, origin):
        self.agent = agent
        self.uri = agent.attach('bystander', origin.uri, cache_size=MiB,
                                write_policy='write_back')['export_uri']
        self.oracle = om.Oracle(origin.content)
        h = om.connect(self.uri)
        for off in range(0, MiB, 64 * 1024):
            d = os.urandom(64 * 1024)
            h.pwrite(d, off)
            self.oracle.write(off, d)
        om.close(h)
        self.status = agent.status()
        self.exports = sorted(os.listdir(agent.export_dir))
        self.states = sorted(os.listdir(os.path.join(agent.state_dir,
                                                     'volumes')))
        self.around = sorted(os.listdir(agent.dir))

    def check(self):
        a = self.agent
        a.assert_alive()
        st = a.status()
        assert [v['volume_id'] for v in st['volumes']] == ['bystander'], st
        for k in ('used_bytes', 'reserved_bytes', 'capacity_bytes'):
            if k in self.status:
                assert st[k] == self.status[k], (k, self.status, st)
        assert sorted(os.listdir(a.export_dir)) == self.exports
        assert sorted(os.listdir(os.path.join(a.state_dir, 'volumes'))) == \
            self.states
        assert sorted(os.listdir(a.dir)) == self.around
        h = om.connect(self.uri)
        assert not om.verify_all(h, self.oracle)
        om.close(h)


@pytest.fixture
def bystander(make_agent, make_origin):
    # Fixed partitions: test_cache_size_too_big checks that a full device
    # refuses an attach (with allocation = rwss, cache_size is only a
    # bound; test_allocation.py).
    agent = make_agent(cache_size='16M', allocation='fixed').start()
    return Bystander(agent, make_origin(4 * MiB))


def agent_error(bystander, op, expect_errno=None, **args):
    """Send ``op`` past nova_ext's check; return the AgentError raised."""
    with pytest.raises(exception.AgentError) as ei:
        bystander.agent.client(unchecked=True).call(op, **args)
    err = ei.value
    assert err.error and '\n' not in err.error
    if expect_errno is not None:
        assert err.errno == expect_errno, (err.errno, err.error)
    return err


def one_reply(bystander, data, **kw):
    replies, _ = bystander.agent.raw_control(data, **kw)
    assert len(replies) == 1, replies
    return replies[0]


def test_malformed_json(bystander):
    for bad in (b'{"op": \n', b'{op: "agent-status"}\n', b'\xff\xfe\x00\n',
                b'{"op":"agent-status"} trailing\n',
                b'{"op":"agent-status","op":"volume-list"}\n'):
        r = one_reply(bystander, bad)
        assert r['ok'] is False and r['errno'] == errno.EINVAL, (bad, r)
        assert r['error'].startswith('invalid JSON'), r
    for bad, words in ((b'5\n', 'JSON object'),
                       (b'[]\n', 'JSON object'),
                       (b'{"args":{}}\n', "'op'"),
                       (b'{"op":5}\n', "'op'"),
                       (b'{"op":"agent-status","args":[1]}\n', "'args'")):
        r = one_reply(bystander, bad)
        assert r['ok'] is False and r['errno'] == errno.EINVAL, (bad, r)
        assert words in r['error'], r
    # One connection, a bad request then a good one: both answered.
    replies, _ = bystander.agent.raw_control(
        b'{"op": nope}\n{"op":"agent-status"}\n')
    assert [r['ok'] for r in replies] == [False, True]
    # A last request without a newline, then EOF.
    r = one_reply(bystander, b'{"op":"agent-status"}')
    assert r['ok'] is True
    bystander.check()


def test_oversized_message(bystander):
    pad = 'a' * (70 * 1024)
    data = json.dumps({'op': 'volume-show',
                       'args': {'volume_id': pad}}).encode()
    replies, closed = bystander.agent.raw_control(data + b'\n',
                                                  expect_close=True)
    assert closed
    assert len(replies) == 1 and replies[0]['ok'] is False, replies
    assert replies[0]['errno'] == errno.EMSGSIZE
    assert '65536' in replies[0]['error'] or 'larger' in replies[0]['error']
    # Just under the limit is read and answered.
    pad = 'a' * (64 * 1024 - 100)
    data = json.dumps({'op': 'volume-show',
                       'args': {'volume_id': pad}}).encode()
    assert len(data) < 64 * 1024
    r = one_reply(bystander, data + b'\n')
    assert r['errno'] == errno.ENOENT, r
    # The client refuses to send an oversized request itself.
    with pytest.raises(exception.InvalidArgument) as ei:
        bystander.agent.client().call('volume-show', volume_id='a' * 70000)
    assert 'exceeds the agent limit' in str(ei.value)
    bystander.check()


def test_unknown_op(bystander):
    err = agent_error(bystander, 'volume-explode', errno.EOPNOTSUPP,
                      volume_id='bystander')
    assert 'volume-explode' in err.error and 'volume-attach' in err.error
    bystander.check()


def test_missing_and_mistyped_args(bystander, make_origin):
    o = make_origin(MiB, nbd=False)
    err = agent_error(bystander, 'volume-attach', errno.EINVAL, origin=o.path)
    assert "volume_id" in err.error
    err = agent_error(bystander, 'volume-attach', errno.EINVAL,
                      volume_id='v2')
    assert "origin" in err.error
    for op in ('volume-show', 'volume-detach'):
        err = agent_error(bystander, op, errno.EINVAL)
        assert "volume_id" in err.error
    err = agent_error(bystander, 'volume-show', errno.EINVAL, volume_id=5)
    assert 'string' in err.error
    for size in ('abc', -1, 0, True, 1.5, '12Q', [1]):
        err = agent_error(bystander, 'volume-attach', errno.EINVAL,
                          volume_id='v2', origin=o.path, cache_size=size)
        assert 'cache_size' in err.error, (size, err.error)
    bystander.check()


@pytest.mark.parametrize('vid', ['../x', 'a/b', '', '.hidden', '..', '/abs',
                                 'a b', 'x' * 65, 'caf\u00e9', 'a\nb',
                                 'nul\u0000byte'])
def test_invalid_volume_id(bystander, make_origin, vid):
    o = make_origin(MiB, nbd=False)
    req = json.dumps({'op': 'volume-attach',
                      'args': {'volume_id': vid, 'origin': o.path}})
    r = one_reply(bystander, req.encode() + b'\n')
    assert r['ok'] is False and r['errno'] == errno.EINVAL, r
    if '\0' in vid:
        # jansson refuses NUL in strings: the whole request is invalid.
        assert 'invalid JSON' in r['error'], r
    elif vid:
        assert 'volume id' in r['error'] or 'volume_id' in r['error'], r
    # Nothing was created next to or above the agent's directories.
    assert not os.path.exists(os.path.join(bystander.agent.dir, 'x.sock'))
    assert not os.path.exists(os.path.join(bystander.agent.state_dir,
                                           'x.json'))
    bystander.check()


def test_invalid_policy(bystander, make_origin):
    o = make_origin(MiB, nbd=False)
    for policy in ('write-back', '', 'WRITE_BACK', 'none'):
        err = agent_error(bystander, 'volume-attach', errno.EINVAL,
                          volume_id='v2', origin=o.path, write_policy=policy)
        assert 'write_policy' in err.error
    err = agent_error(bystander, 'volume-attach', errno.EINVAL,
                      volume_id='v2', origin=o.path, admission='lru')
    assert 'admission' in err.error
    bystander.check()


def test_cache_size_too_big(bystander, make_origin):
    o = make_origin(MiB, nbd=False)
    cap = bystander.agent.status()['capacity_bytes']
    err = agent_error(bystander, 'volume-attach', errno.ENOSPC,
                      volume_id='v2', origin=o.path, cache_size=cap + BS)
    assert 'cache' in err.error and str(cap) in err.error, err.error
    # The bystander holds 1 MiB: asking for all of it no longer fits.
    err = agent_error(bystander, 'volume-attach', errno.ENOSPC,
                      volume_id='v2', origin=o.path, cache_size=cap)
    assert 'cache device full' in err.error, err.error
    # What is left does fit; then nothing more.
    left = cap - MiB
    bystander.agent.attach('v2', o.path, cache_size=left)
    other = make_origin(MiB, nbd=False)
    err = agent_error(bystander, 'volume-attach', errno.ENOSPC,
                      volume_id='v3', origin=other.path, cache_size=BS)
    assert 'cache device full' in err.error, err.error
    bystander.agent.detach('v2')
    bystander.check()


def test_bad_origins(bystander, workdir, make_origin):
    missing = os.path.join(workdir, 'no-such-volume.img')
    empty = os.path.join(workdir, 'empty.img')
    open(empty, 'wb').close()
    dead_sock = os.path.join(workdir, 'dead.sock')
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(dead_sock)               # exists, nobody listens
    s.close()
    port = harness.free_tcp_port()
    cases = [
        missing,
        workdir,                                    # a directory
        empty,
        'relative/path.img',
        'nbd+unix:///?socket=%s' % os.path.join(workdir, 'nobody.sock'),
        'nbd+unix:///?socket=%s' % dead_sock,
        'nbd://127.0.0.1:%d/' % port,
        'http://example.com/x',
    ]
    for origin in cases:
        err = agent_error(bystander, 'volume-attach', volume_id='v2',
                          origin=origin, cache_size=MiB)
        assert origin in err.error, (origin, err.error)
        assert err.errno and err.errno != errno.EEXIST
        assert not os.path.exists(os.path.join(bystander.agent.export_dir,
                                               'v2.sock'))
    bystander.check()


def test_attach_twice(bystander, make_origin):
    a = bystander.agent
    o = make_origin(MiB, nbd=False)
    o2 = make_origin(MiB, nbd=False)
    first = a.attach('v2', o.path, cache_size=MiB, write_policy='write_back')
    # Identical: idempotent, same export.
    again = a.attach('v2', o.path, cache_size=MiB, write_policy='write_back')
    assert again == first
    for other in (dict(origin=o2.path, cache_size=MiB,
                       write_policy='write_back'),
                  dict(origin=o.path, cache_size=2 * MiB,
                       write_policy='write_back'),
                  dict(origin=o.path, cache_size=MiB,
                       write_policy='write_through'),
                  dict(origin=o.path, cache_size=MiB,
                       write_policy='write_back', admission='rws')):
        err = agent_error(bystander, 'volume-attach', errno.EEXIST,
                          volume_id='v2', **other)
        assert 'already attached' in err.error
    st = a.show('v2')
    assert st['origin'] == o.path and st['cache_size'] == MiB
    assert st['write_policy'] == 'write_back'
    a.detach('v2')
    bystander.check()


def test_detach_unknown(bystander):
    err = agent_error(bystander, 'volume-detach', errno.ENOENT,
                      volume_id='never-attached')
    assert 'never-attached' in err.error
    err = agent_error(bystander, 'volume-show', errno.ENOENT,
                      volume_id='never-attached')
    bystander.agent.detach('bystander')
    err = agent_error(bystander, 'volume-detach', errno.ENOENT,
                      volume_id='bystander')


def test_many_connections_and_abrupt_clients(bystander):
    """Clients that connect and vanish, or never send, cost nothing."""
    socks = []
    for i in range(20):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(bystander.agent.control_socket)
        if i % 2:
            s.sendall(b'{"op": "agent-st')
        socks.append(s)
    for s in socks:
        s.close()
    # The agent needs a few ms to drain its accept queue; a connect in that
    # window gets EAGAIN (see test_client_waits_for_a_busy_agent).
    harness.wait_for(lambda: raw_connect_ok(bystander.agent.control_socket),
                     10, 'the control socket to accept again')
    bystander.check()


def raw_connect_ok(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
        return True
    except BlockingIOError:
        return False
    finally:
        s.close()


def status_in_thread(agent):
    """agent-status through AgentClient in a thread, given 0.5 s to run."""
    result = {}

    def call():
        try:
            result['ok'] = agent.client(timeout=20).status()
        except Exception as exc:
            result['error'] = exc
    t = threading.Thread(target=call)
    t.start()
    t.join(0.5)
    return t, result


def test_connection_limit_answers_busy(bystander):
    """Past its 32 connections the agent answers "busy", and a client retries.

    The refusal comes before the request is read, marked ``"busy": true``
    so that a client knows nothing ran and may send the same request
    again; AgentClient does, within its timeout.
    """
    agent = bystander.agent
    idle = []
    try:
        for _ in range(32):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(agent.control_socket)
            idle.append(s)
        # Each idle connection has its own thread once accepted.

        def refused():
            reply = agent.raw_control(b'{"op":"agent-status"}\n')[0][0]
            return reply if reply.get('busy') else None
        reply = harness.wait_for(
            refused, 10, 'the agent to refuse a 33rd connection as busy')
        assert reply['ok'] is False and reply['busy'] is True, reply
        assert reply['errno'] == errno.EAGAIN, reply
        assert 'too many control connections' in reply['error'], reply
        t, result = status_in_thread(agent)
        assert t.is_alive(), result
    finally:
        for s in idle:
            s.close()
    t.join(30)
    assert 'ok' in result, result
    bystander.check()


def test_client_waits_for_a_busy_agent(bystander):
    """A full accept queue is "busy", not "unreachable".

    The agent is paused (SIGSTOP) while its listen backlog fills up, as
    with a burst of clients; an AgentClient call made then must wait (up
    to its timeout) for the agent to catch up, not fail at once.
    """
    agent = bystander.agent
    fillers = []
    harness.pause_process(agent.pid)
    try:
        while len(fillers) < 200:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(agent.control_socket)
            except BlockingIOError:
                s.close()
                break
            fillers.append(s)
        t, result = status_in_thread(agent)
    finally:
        os.kill(agent.pid, signal.SIGCONT)
    for s in fillers:
        s.close()
    t.join(30)
    assert 'ok' in result, result
    bystander.check()


# ---------------------------------------------------------------------------
# Permissions
# ---------------------------------------------------------------------------

def test_control_socket_mode_root_only(make_agent, make_origin):
    agent = make_agent().start()
    st = os.stat(agent.control_socket)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_uid == 0


def test_control_socket_mode_with_group(make_agent, make_origin):
    agent = make_agent(control_group='root').start()
    st = os.stat(agent.control_socket)
    assert stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
    assert st.st_gid == 0
    o = make_origin(MiB, nbd=False)
    uri = agent.attach('v', o.path, cache_size=MiB)['export_uri']
    est = os.stat(uri.split('socket=', 1)[1])
    assert stat.S_IMODE(est.st_mode) == 0o660 and est.st_gid == 0


def test_control_group_unknown(make_agent):
    agent = make_agent(control_group='no-such-group-fcache')
    rc, log = agent.start_expect_failure()
    assert rc != 0
    assert 'no-such-group-fcache' in log, log


def test_export_group_gives_exports_to_the_hypervisor(make_agent,
                                                      make_origin):
    """QEMU under libvirt runs as its own user: export_group is its group.

    The operators' control_group does not reach the exports (they hold
    tenants' disks); without export_group they stay root's.
    """
    hyper = grp.getgrnam('nogroup')
    agent = make_agent(control_group='daemon',
                       export_group='nogroup').start()
    o = make_origin(MiB, nbd=False)
    uri = agent.attach('v', o.path, cache_size=MiB)['export_uri']
    est = os.stat(uri.split('socket=', 1)[1])
    assert stat.S_IMODE(est.st_mode) == 0o660, oct(est.st_mode)
    assert est.st_gid == hyper.gr_gid
    plain = make_agent(name='plain', control_group='daemon').start()
    uri = plain.attach('v', o.path, cache_size=MiB)['export_uri']
    assert os.stat(uri.split('socket=', 1)[1]).st_gid == 0


def test_export_group_unknown_fails_the_attach(make_agent, make_origin):
    agent = make_agent(export_group='no-such-group-fcache').start()
    o = make_origin(MiB, nbd=False)
    rc, out, err = mu.fcache(['--socket', agent.control_socket,
                              'volume-attach', 'v', '--origin', o.path])
    assert rc != 0
    assert "group 'no-such-group-fcache' (export_group): no such group" in \
        err, err
    assert agent.status()['volumes'] == [], agent.status()


def test_strategy_hint(bystander):
    """volume-hint: checked, shown by volume-show, cleared, expiring."""
    for args, expect_errno, words in (
            (dict(volume_id='bystander', strategy='fastest'), errno.EINVAL,
             "strategy 'fastest' is not one of"),
            (dict(volume_id='bystander', strategy='hybrid', ttl_s=0),
             errno.EINVAL,
             "'ttl_s' of 'volume-hint' must be an integer from 1 to 86400"),
            (dict(volume_id='bystander', strategy='hybrid', ttl_s='9'),
             errno.EINVAL, "'ttl_s'"),
            (dict(volume_id='nobody', strategy='hybrid'), errno.ENOENT,
             'not attached')):
        err = agent_error(bystander, 'volume-hint', expect_errno, **args)
        assert words in err.error, err.error
    client = bystander.agent.client()
    assert 'strategy_hint' not in client.show_volume('bystander')
    client.set_strategy_hint('bystander', 'firepan_if', ttl_s=600)
    hint = client.show_volume('bystander')['strategy_hint']
    assert hint['strategy'] == 'firepan_if'
    assert 590 <= hint['expires_in_s'] <= 600, hint
    client.set_strategy_hint('bystander', '')
    assert 'strategy_hint' not in client.show_volume('bystander')
    client.set_strategy_hint('bystander', 'none', ttl_s=1)
    harness.wait_for(
        lambda: 'strategy_hint' not in client.show_volume('bystander'),
        5, 'the hint to expire')
    bystander.check()
