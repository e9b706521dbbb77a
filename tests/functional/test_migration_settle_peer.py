# SPDX-License-Identifier: Apache-2.0
"""Settling a failed migration through the agents, from either host.

A migration's link is cut after its switchover (the copy half-way, the VM
writing on the destination), so that both agents hold the volume.  Then
one agent alone, given ``migration-settle step=all`` on its own control
socket, settles it with its peer over the peer's migration listener
(``nova_ext.migration.settle_through``, migration/migr_settle_peer.c),
even after either agent was killed and restarted.  Every read afterwards
returns the oracle's data and the origin ends up with exactly the
oracle's bytes.  The session authenticates with the secret the
destination sent inside the migration's own stream, which both agents
keep beside the volume's migration mark and forget once settled; what is
not that is refused.
"""

import errno
import json
import os
import socket
import stat
import time

import pytest

from nova_ext import exception
from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

from . import test_migration_tls

VOLUME_SIZE = mu.VOLUME_SIZE
VOLUME_CACHE = mu.VOLUME_CACHE
T_HELLO, T_WELCOME, T_ERROR, T_LIST = 1, 2, 3, 4
T_STEP, T_STEP_DONE = 14, 15


def state(agent, volume_id='vol1'):
    """The volume's state file, or None once the volume left the host."""
    path = os.path.join(agent.state_dir, 'volumes', volume_id + '.json')
    try:
        with open(path) as f:
            return json.load(f), os.stat(path)
    except FileNotFoundError:
        return None, None


def write_state(agent, st, volume_id='vol1'):
    path = os.path.join(agent.state_dir, 'volumes', volume_id + '.json')
    with open(path, 'w') as f:
        json.dump(st, f)


def fail_after_switchover(make_agent, make_origin, proxies, tls='pinned',
                          tls_dir=None):
    """A hybrid migration through a proxy, cut after its switchover.

    Cut while copying: returns (src, dst, origin, orc, vm, mid, proxy).
    The proxy passes later connections again (a link that came back), as
    the source reaches the destination through it.
    """
    conf = {'migration_tls': tls}
    if tls_dir:
        conf['migration_tls_dir'] = tls_dir
    src, dst, origin, orc, vm, uri = mu.setup_source(
        make_agent, make_origin, 'write_back',
        src_extra=dict(conf, writeback_interval_ms=60000,
                       dirty_high_percent=95),
        dst_extra=conf)
    vm.run_for(0.5)
    vm.wl.assert_clean()
    s, d = src.client(), dst.client()
    inc = mu.incoming_only(dst, 'vol1', src.show('vol1')['origin'],
                           VOLUME_CACHE, 'write_back', strategy='hybrid',
                           src=src if tls == 'pinned' else None)
    proxy = mu.TcpProxy(inc['listen'])
    proxies.append(proxy)
    mu.outgoing_only(src, inc, 'vol1', 'hybrid', destination=proxy.address,
                     rate_limit_bps=1000 * 1000)
    mid = inc['migration_id']
    migration.start(s, d, mid)
    assert src.show('vol1')['dirty_blocks'] > 0
    vm.move(inc['export_uri'])
    vm.resume()
    migration.switchover(s, d, mid)
    st = mu.wait_state(dst, mid, ('switched', 'completed', 'failed'))
    assert st['state'] == 'switched', st
    harness.wait_for(lambda: mu.status(src, mid)['blocks_done'] > 300, 30,
                     'the background copy to get going')
    # Not failed: nothing to settle, from either host.
    for a in (src, dst):
        with pytest.raises(exception.AgentError) as ei:
            migration.settle_through(a.client(), mid, 'vol1')
        assert ei.value.errno == errno.EBUSY, ei.value
        assert 'has not failed' in str(ei.value), ei.value
    vm.pause()
    vm.wl.assert_clean()
    vm.wl.tolerate_errors = True
    vm.resume()
    proxy.reset()
    mu.wait_state(src, mid, ('failed',), timeout=20)
    mu.wait_state(dst, mid, ('failed',), timeout=20)
    vm.pause()
    om.close(vm.h)
    return src, dst, origin, orc, vm, mid, proxy


def check_kept(src, dst, mid, proxy):
    """Both agents keep the same secret and each other's address.

    In a file only the agent reads; nobody is told on the control socket.
    """
    s, s_stat = state(src)
    d, d_stat = state(dst)
    assert s['migration'] == 'out:' + mid, s
    assert d['migration'] == 'in:' + mid, d
    secret = d['settle_secret']
    assert len(secret) == 64 and int(secret, 16) >= 0, d
    assert s['settle_secret'] == secret
    assert s['settle_peer'] == proxy.address, s
    assert d['settle_peer'] == src.settings['migration_listen'], d
    for st in (s_stat, d_stat):
        assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    for a in (src, dst):
        seen = json.dumps([a.show('vol1'), mu.status(a, mid),
                           a.client().list_volumes()])
        assert secret not in seen
    return secret


def check_settled(src, dst, origin, orc, mid, res, mode):
    """Settled: the source let go, the destination serves the oracle.

    Every block reads the oracle's data, the VM goes on, and the origin
    ends up exact.
    """
    assert res['mode'] == mode, res
    assert res['given_up_blocks'] == 0, res
    assert mu.volume_gone(src, 'vol1'), src.client().list_volumes()
    assert state(src)[0] is None
    d, _ = state(dst)
    assert 'migration' not in d and 'settle_secret' not in d, d
    mu.assert_settled_volume_serves(dst, orc, res)
    # Once is all: neither host has anything left to settle.
    for a in (src, dst):
        with pytest.raises(exception.AgentError) as ei:
            migration.settle_through(a.client(), mid, 'vol1')
        assert ('not attached' in str(ei.value) or
                'no unsettled migration' in str(ei.value)), ei.value
    dst.detach('vol1')
    assert not om.compare(orc, origin.read_file(), 'origin')


@pytest.mark.timeout(180)
@pytest.mark.parametrize('initiator,killed,tls', [
    ('source', 'destination', 'pinned'), ('destination', 'source', 'pinned'),
    ('source', 'source', 'pinned'),
    ('destination', 'destination', 'pinned'),
    ('destination', 'source', 'psk'), ('source', 'source', 'x509')])
def test_settle_from_one_host(make_agent, make_origin, workdir, initiator,
                              killed, tls):
    proxies = []
    tls_dir = None
    if tls == 'x509':
        # The host certificates (libvirt's layout), as a migration uses.
        tls_dir = test_migration_tls.make_pki(
            os.path.join(workdir, 'pki'), 'fcache settle CA')
    try:
        src, dst, origin, orc, vm, mid, proxy = fail_after_switchover(
            make_agent, make_origin, proxies, tls=tls, tls_dir=tls_dir)
        check_kept(src, dst, mid, proxy)
        listed = mu.status(dst, mid)['remote_dirty_blocks']
        assert listed > 0
        victim = src if killed == 'source' else dst
        victim.kill()
        victim.start()
        # A restarted destination no longer knows which blocks only the
        # source has: it lists what it holds instead (doc: "held").
        mode = 'held' if killed == 'destination' else 'missing'
        here = src if initiator == 'source' else dst
        res = migration.settle_through(here.client(), mid, 'vol1')
        assert res['settled_from'] == initiator, res
        if mode == 'missing':
            assert res['blocks'] == listed, res
        check_settled(src, dst, origin, orc, mid, res, mode)
        src.assert_alive()
        dst.assert_alive()
    finally:
        for p in proxies:
            p.close()


@pytest.mark.timeout(180)
def test_wrong_secret_is_refused(make_agent, make_origin):
    """A settle secret that is not the peer's opens nothing.

    From either side, and it changes nothing; the right one then settles.
    """
    proxies = []
    try:
        src, dst, origin, orc, vm, mid, proxy = fail_after_switchover(
            make_agent, make_origin, proxies)
        secret = check_kept(src, dst, mid, proxy)
        src.kill()
        kept, _ = state(src)
        kept['settle_secret'] = ('0' if secret[0] != '0' else '1') + \
            secret[1:]
        write_state(src, kept)
        src.start()
        dirty = src.show('vol1')['dirty_blocks']
        for a in (src, dst):
            with pytest.raises(exception.AgentError) as ei:
                migration.settle_through(a.client(), mid, 'vol1')
            assert 'settle' in str(ei.value), ei.value
            assert ei.value.errno == errno.EACCES, ei.value
        assert 'settle session' in src.log() + dst.log()
        assert src.show('vol1')['dirty_blocks'] == dirty
        assert state(src)[0]['migration'] == 'out:' + mid
        assert state(dst)[0]['migration'] == 'in:' + mid
        src.kill()
        kept['settle_secret'] = secret
        write_state(src, kept)
        src.start()
        res = migration.settle_through(src.client(), mid, 'vol1')
        check_settled(src, dst, origin, orc, mid, res, 'missing')
    finally:
        for p in proxies:
            p.close()


def settle_stream(agent, mid, secret, volume_id='vol1'):
    """A plaintext settle stream to ``agent`` (migration_tls = none)."""
    sock = socket.create_connection(
        tuple(agent.settings['migration_listen'].rsplit(':', 1)), timeout=10)
    hello = {'settle': True, 'migration_id': mid, 'volume_id': volume_id,
             'secret': secret}
    sock.sendall(mu.frame(T_HELLO, json.dumps(hello).encode()))
    return sock


def refusal(sock):
    f = mu.recv_frame(sock)
    assert f is not None and f[0] == T_ERROR, f
    assert mu.recv_frame(sock) is None     # and the stream ends
    sock.close()
    return json.loads(f[2])['error']


@pytest.mark.timeout(180)
def test_settle_stream_takes_only_its_own_steps(make_agent, make_origin):
    """What the responder refuses, seen on the wire.

    With migration_tls = none, so that the frames can be written here: a
    wrong secret, another volume, transfer frames, the other role's steps,
    giving up the source's blocks; and a second settle once it finished.
    """
    proxies = []
    try:
        src, dst, origin, orc, vm, mid, proxy = fail_after_switchover(
            make_agent, make_origin, proxies, tls='none')
        secret = check_kept(src, dst, mid, proxy)
        # A session waiting for its peer's next step does not hold up the
        # agent's stop: it is cut.  (The restarted source settles below.)
        idle = settle_stream(src, mid, secret)
        f = mu.recv_frame(idle)
        assert f[0] == T_WELCOME, f
        t0 = time.monotonic()
        src.restart()
        assert time.monotonic() - t0 < 10
        assert mu.recv_frame(idle) is None
        idle.close()
        wrong = ('0' if secret[0] != '0' else '1') + secret[1:]
        assert 'wrong settle secret' in refusal(
            settle_stream(dst, mid, wrong))
        assert 'no such volume' in refusal(
            settle_stream(dst, mid, secret, volume_id='vol2'))
        for agent, role in ((src, 'source'), (dst, 'destination')):
            sock = settle_stream(agent, mid, secret)
            f = mu.recv_frame(sock)
            assert f[0] == T_WELCOME and json.loads(f[2])['role'] == role
            sock.sendall(mu.frame(T_LIST, b'\0' * 8))
            assert 'only STEP' in refusal(sock)
        sock = settle_stream(src, mid, secret)
        mu.recv_frame(sock)
        sock.sendall(mu.frame(T_STEP, json.dumps({'step': 'list'}).encode()))
        assert 'not its to take' in refusal(sock)
        sock = settle_stream(dst, mid, secret)
        mu.recv_frame(sock)
        sock.sendall(mu.frame(T_STEP, json.dumps(
            {'step': 'end', 'source': 'lost'}).encode()))
        assert 'source=released' in refusal(sock)
        # A step of its own, for the migration and volume of the HELLO
        # whatever the request names.
        sock = settle_stream(dst, mid, secret)
        mu.recv_frame(sock)
        sock.sendall(mu.frame(T_STEP, json.dumps(
            {'step': 'list', 'volume_id': 'other',
             'migration_id': 'other'}).encode()))
        f = mu.recv_frame(sock)
        assert f[0] == T_STEP_DONE, f
        page = json.loads(f[2])
        assert page['mode'] == 'missing' and page['blocks'], page
        sock.close()
        # Nothing above changed anything: the real settle goes through.
        res = migration.settle_through(dst.client(), mid, 'vol1')
        # Settled: the secret opens nothing any more.
        assert 'no unsettled migration' in refusal(
            settle_stream(dst, mid, secret))
        assert 'no such volume' in refusal(settle_stream(src, mid, secret))
        check_settled(src, dst, origin, orc, mid, res, 'missing')
    finally:
        for p in proxies:
            p.close()
