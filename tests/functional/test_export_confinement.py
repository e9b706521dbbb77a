# SPDX-License-Identifier: Apache-2.0
"""An export opens only for the client that was told its name.

Every VM's QEMU runs as the same user in ``export_group``, so the socket's
mode admits them all.  Each attachment's export is therefore named by a
fresh random secret that only volume-attach's reply carries (the
orchestrator puts it in the guest's domain XML): a process that finds the
socket but not the name cannot open it, does not see it listed, and
cannot lock the VM out by connecting first (doc/admin/security.rst).
"""

import json
import os
import socket
import stat
import subprocess
import sys
from urllib import parse

import pytest

from fcache_testkit import harness
from fcache_testkit import oracle as om

MiB = 1 << 20

# Another process (its own session, as another VM's QEMU): which export
# names NBD_OPT_LIST shows, and whether it can read through each URI given.
WATCHER = '''
import json, sys
import nbd

sock = sys.argv[1]
out = {}
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri('nbd+unix:///?socket=' + sock)
names = []
h.opt_list(lambda name, desc: names.append(name) or 0)
h.opt_abort()
out['listed'] = names
for uri in sys.argv[2:]:
    h = nbd.NBD()
    try:
        h.connect_uri(uri)
        out[uri] = h.pread(4096, 0).hex()
        h.shutdown()
    except nbd.Error as e:
        out[uri] = 'refused: %s' % e
print(json.dumps(out))
'''

# Another process that connects and then sits in the handshake, holding
# its connection until stdin closes.
HOLDER = '''
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.recv(18)
print('holding', flush=True)
sys.stdin.read()
'''

READER = '''
import sys
import nbd
h = nbd.NBD()
try:
    h.connect_uri(sys.argv[1])
    sys.stdout.write(h.pread(4096, 0).hex())
    h.shutdown()
except nbd.Error as e:
    sys.stdout.write('refused: %s' % e)
'''


def read_elsewhere(uri):
    """Block 0 as read by a process of another session, or 'refused...'."""
    r = subprocess.run([sys.executable, '-c', READER, uri],
                       stdout=subprocess.PIPE, timeout=60,
                       start_new_session=True)
    return r.stdout.decode()


def split(uri):
    parts = parse.urlsplit(uri)
    return (parts.path.lstrip('/'),
            parse.parse_qs(parts.query)['socket'][0])


def guesses(sock, volume_id):
    """What a process that sees the socket might try as the export's URI."""
    return ['nbd+unix:///?socket=' + sock,
            'nbd+unix:///%s?socket=%s' % (volume_id, sock)]


@pytest.fixture
def attached(make_agent, make_origin):
    agent = make_agent(cache_size='8M', export_clients='session').start()
    origin = make_origin(4 * MiB)
    uri = agent.attach('vol1', origin.uri, cache_size=MiB)['export_uri']
    return agent, uri, split(uri)[1], origin.content[:4096].hex()


@pytest.mark.timeout(120)
def test_watcher_without_the_name_cannot_list_or_open(attached):
    agent, uri, sock, first = attached
    r = subprocess.run([sys.executable, '-c', WATCHER, sock] +
                       guesses(sock, 'vol1'), stdout=subprocess.PIPE,
                       timeout=60, start_new_session=True)
    seen = json.loads(r.stdout.decode() or '{}')
    assert seen.get('listed') == [], seen
    for g in guesses(sock, 'vol1'):
        assert seen[g].startswith('refused'), (g, seen[g])
    name = split(uri)[0]
    assert len(name) == 32 and int(name, 16) >= 0, uri
    assert name not in agent.log()


@pytest.mark.timeout(120)
def test_watcher_that_connects_first_does_not_lock_out_the_vm(attached):
    agent, uri, sock, first = attached
    w = subprocess.Popen([sys.executable, '-c', HOLDER, sock],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         start_new_session=True)
    try:
        assert w.stdout.readline() == b'holding\n'
        # The watcher holds a connection; the VM's client (another
        # session) opens the export all the same.
        h = om.connect(uri)
        assert h.pread(4096, 0).hex() == first
        om.close(h)
    finally:
        w.stdin.close()
        w.wait(30)


@pytest.mark.timeout(120)
def test_reaped_owner_leaves_export_closed_to_others(attached):
    agent, uri, sock, first = attached
    # The VM's QEMU, in its own session, opens the export and exits.
    assert read_elsewhere(uri) == first
    harness.wait_for(lambda: agent.show('vol1')['connections'] == 0, 10,
                     'the owner\'s connection to close')
    for g in guesses(sock, 'vol1'):
        assert read_elsewhere(g).startswith('refused'), g
    # A QEMU started again for the VM (a new session) has the name.
    assert read_elsewhere(uri) == first


@pytest.mark.timeout(180)
def test_export_name_survives_kill9(attached):
    agent, uri, sock, first = attached
    h = om.connect(uri)
    h.pwrite(b'\x5a' * 4096, 0)
    h.flush()
    agent.kill()
    del h
    agent.start()
    # QEMU reconnects with the URI it was given, as after any restart;
    # the export still answers to that name only.
    h = om.connect(uri)
    assert h.pread(4096, 0) == b'\x5a' * 4096
    om.close(h)
    for g in guesses(sock, 'vol1'):
        assert read_elsewhere(g).startswith('refused'), g
    # Kept with the volume's parameters, for root only, and not logged.
    name = split(uri)[0]
    state = os.path.join(agent.state_dir, 'volumes', 'vol1.json')
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    with open(state) as f:
        assert json.load(f)['export_secret'] == name
    assert name not in agent.log()


def test_old_style_export_name_without_the_name_is_closed(attached):
    """NBD_OPT_EXPORT_NAME (which has no error reply) for "": closed."""
    agent, uri, sock, first = attached
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    try:
        assert len(s.recv(18)) == 18
        s.sendall(b'\0\0\0\3')                       # FIXED_NEWSTYLE|NO_ZEROES
        # NBD_OPT_EXPORT_NAME, no data: the default export.
        s.sendall(b'IHAVEOPT' + (1).to_bytes(4, 'big') + bytes(4))
        assert s.recv(16) == b''
    finally:
        s.close()


def test_volume_attached_before_names_keeps_its_export(attached):
    """A state file without a name (an older agent's): served as then."""
    agent, uri, sock, first = attached
    agent.stop()
    state = os.path.join(agent.state_dir, 'volumes', 'vol1.json')
    with open(state) as f:
        params = json.load(f)
    del params['export_secret']
    with open(state, 'w') as f:
        json.dump(params, f)
    agent.start()
    old = 'nbd+unix:///?socket=' + sock
    assert agent.show('vol1')['export_uri'] == old
    h = om.connect(old)
    assert h.pread(4096, 0).hex() == first
    om.close(h)
    assert 'attached by an agent without export names' in agent.run_log()
