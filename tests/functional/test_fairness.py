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
"""

import os
import subprocess
import sys
import time

import pytest

CONTROL_IDLE_S = 3
ATTACK_UIDS = range(65526, 65534)   # eight uids, all in group nogroup
READERS = 'nogroup'

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
    assert "refused 'volume-detach'" in log
