# SPDX-License-Identifier: Apache-2.0
"""The agent under systemd: sd_notify readiness and watchdog, journald
priorities.

systemd is not PID 1 here, so the test plays its part: it binds the
NOTIFY_SOCKET datagram socket a Type=notify unit gets and reads what the
real agent sends, and it sets JOURNAL_STREAM to the device:inode of the
agent's stderr, as systemd does when stderr is the journal.
"""
import os
import socket
import time

import pytest

from fcache_testkit import harness
from fcache_testkit import oracle as oracle_mod


def _bind_notify(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    return s


def _messages(sock, until, timeout):
    """Datagrams received until ``until(messages)`` holds or timeout."""
    got = []
    deadline = time.monotonic() + timeout
    while not until(got):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            got.append(sock.recv(4096).decode())
        except socket.timeout:
            break
    return got


def test_ready_once_listening_then_watchdog(make_agent, workdir):
    path = os.path.join(workdir, 'notify')
    sock = _bind_notify(path)
    agent = make_agent()
    # 0.4 s: the agent pings every 0.2 s.
    agent.env = {'NOTIFY_SOCKET': path, 'WATCHDOG_USEC': '400000'}
    try:
        agent.start()
        msgs = _messages(sock, lambda m: sum(
            'WATCHDOG=1' in x for x in m) >= 3, timeout=20)
        ready = [m for m in msgs if 'READY=1' in m.split('\n')]
        assert len(ready) == 1, msgs
        # READY=1 came first, and only once the control socket existed
        # (start() waited for it to answer; the datagram was queued).
        assert 'READY=1' in msgs[0].split('\n'), msgs
        assert sum(m == 'WATCHDOG=1' for m in msgs) >= 3, msgs
        agent.stop()
        after = _messages(sock, lambda m: 'STOPPING=1' in m, timeout=10)
        assert 'STOPPING=1' in after, after
    finally:
        sock.close()


def test_no_watchdog_for_another_pid(make_agent, workdir):
    path = os.path.join(workdir, 'notify')
    sock = _bind_notify(path)
    agent = make_agent()
    agent.env = {'NOTIFY_SOCKET': path, 'WATCHDOG_USEC': '200000',
                 'WATCHDOG_PID': '1'}
    try:
        agent.start()
        msgs = _messages(sock, lambda m: False, timeout=1.5)
        assert msgs and msgs[0].startswith('READY=1'), msgs
        assert 'WATCHDOG=1' not in msgs, msgs
    finally:
        sock.close()


def _journal_env(agent, journal):
    # The log file exists before the run: its device:inode is the stream
    # systemd would name.  Otherwise, a JOURNAL_STREAM inherited from
    # elsewhere, which is not our stderr.
    open(agent.logfile, 'ab').close()
    st = os.stat(agent.logfile)
    return {'JOURNAL_STREAM': '%d:%d' % (st.st_dev, st.st_ino)
            if journal else '1:1'}


@pytest.mark.parametrize('journal', [True, False])
def test_journal_priorities(make_agent, workdir, journal):
    agent = make_agent()
    agent.env = _journal_env(agent, journal)
    agent.start()
    missing = os.path.join(workdir, 'no-such-origin.img')
    with pytest.raises(Exception):
        agent.attach('vol-missing', missing)
    agent.stop()
    lines = agent.run_log().splitlines()
    # A refused attach is a warning, and names its volume.
    refused = [ln for ln in lines if 'volume-attach' in ln and 'failed' in ln]
    assert len(refused) == 1, lines
    assert 'of volume vol-missing failed' in refused[0], refused
    ready = [ln for ln in lines if ' ready: engine ' in ln]
    assert len(ready) == 1, lines
    if journal:
        assert refused[0].startswith('<4>WARNING: control: '), refused
        assert ready[0].startswith('<6>INFO: fcache-agent '), ready
        # journald stamps lines itself: no timestamp, no ident[pid].
        assert 'fcache-agent[' not in '\n'.join(refused + ready)
        assert all(ln.startswith('<') for ln in lines if ln), lines
    else:
        assert not any(ln.startswith('<') for ln in lines if ln), lines
        assert 'fcache-agent[' in refused[0], refused


@pytest.mark.parametrize('journal', [True, False])
def test_journal_error_line(make_agent, workdir, journal):
    # A state_dir that cannot be created: the agent logs an error and
    # exits.
    agent = make_agent(state_dir=os.path.join(workdir, 'no', 'such', 'x'))
    os.makedirs(os.path.join(workdir, 'no'))
    os.chmod(os.path.join(workdir, 'no'), 0o500)
    open(os.path.join(workdir, 'no', 'such'), 'w').close()
    agent.env = _journal_env(agent, journal)
    rc, log = agent.start_expect_failure()
    assert rc == 1, log
    errors = [ln for ln in log.splitlines() if 'cannot start' in ln]
    assert len(errors) == 1, log
    if journal:
        assert errors[0].startswith('<3>ERROR: cannot start: '), errors
    else:
        assert not errors[0].startswith('<'), errors
        assert 'fcache-agent[' in errors[0], errors


def test_volume_lines_name_the_volume(make_agent, make_origin):
    # journalctl -g VOLUME must find a volume's whole life: its attach,
    # each NBD connection opened and closed, its detach.
    agent = make_agent().start()
    origin = make_origin(4 * 1024 * 1024)
    res = agent.attach('vol-named', origin.uri)
    h = oracle_mod.connect(res['export_uri'], name='vol-named')
    assert h.pread(4096, 0) == origin.content[:4096]
    oracle_mod.close(h)
    harness.wait_for(lambda: any(
        'nbd:' in ln and ln.endswith(' closed')
        for ln in agent.run_log().splitlines()), 10,
        'the NBD connection to close')
    agent.detach('vol-named')
    agent.stop()
    lines = agent.run_log().splitlines()
    # Each event by its words alone, whatever the line says of the volume.
    for what in (' attached: origin ', ' opened', ' closed', ' detached'):
        about = [ln for ln in lines if what in ln]
        assert about, (what, lines)
        assert all('vol-named' in ln for ln in about), (what, about)
