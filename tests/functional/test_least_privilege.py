# SPDX-License-Identifier: Apache-2.0
"""Least privilege: what a client allowed on the control socket can make
the agent (root) open, and which operations each group may call.

* Origins: a block device by what it is, whatever os-brick calls it
  (/dev/sdX, /dev/nvmeXnY, ...), a file only under ``origin_prefixes``
  (here the work directory); never a host file, the cache, the state
  directory, a link leading out, a character device, a mounted block
  device, or a disk another volume already caches under another name.
  Each refused attach names the key to change, creates no export, and
  leaves no descriptor on the target in the agent.
* Groups: a member of ``control_group`` reads status but may not attach,
  detach or migrate (EPERM naming ``control_admin_group``); a member of
  ``control_admin_group`` may.  The clients run as throwaway users made
  here (useradd), with setpriv.
* Exports: while a client holds one, only its kernel session may connect;
  readers do not see the export names (test_export_confinement.py tests
  what the name guards).
"""

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from urllib import parse
import uuid

import pytest

from nova_ext import exception

from fcache_testkit import harness
from fcache_testkit import oracle as om

MiB = 1 << 20


def agent_fds(agent):
    """The files and devices the agent's descriptors point at.

    Not its sockets: the control connection of the request comes and goes.
    """
    d = '/proc/%d/fd' % agent.pid
    out = set()
    for fd in os.listdir(d):
        try:
            target = os.readlink(os.path.join(d, fd))
            if target.startswith('/'):
                out.add(target)
        except OSError:
            pass
    return out


def refused(agent, origin, *words):
    """Attaching ``origin`` fails, with a message holding ``words``.

    EPERM (or ``words``' errno) and a one-line message holding each of
    ``words``; nothing is opened.
    """
    before = agent_fds(agent)
    with pytest.raises(exception.AgentError) as ei:
        agent.attach('intruder', origin, cache_size=MiB)
    err = ei.value
    assert '\n' not in err.error, err.error
    for w in words:
        assert w in err.error, (origin, err.error)
    assert not os.path.exists(os.path.join(agent.export_dir,
                                           'intruder.sock'))
    assert agent_fds(agent) - before == set(), agent_fds(agent) - before
    return err


@pytest.fixture
def agent(make_agent):
    return make_agent(cache_size='8M').start()


def test_host_files_are_refused(agent, workdir, make_origin):
    fine = make_origin(2 * MiB, nbd=False)
    err = refused(agent, '/etc/passwd', 'a regular file outside the agent\'s '
                  'origin_prefixes', 'add its directory to origin_prefixes')
    assert err.errno == errno.EPERM
    refused(agent, '/etc/shadow', 'origin_prefixes')
    # Lexically inside the prefix, but not really.
    refused(agent, os.path.join(workdir, '..', 'etc', 'passwd'),
            "'.' or '..' components")
    for name, target, words in (
            ('shadow-link', '/etc/shadow', ('resolves to /etc/shadow',
                                            'outside')),
            ('etc-dir', '/etc', ('outside',)),
            ('null', '/dev/null', ('a character device',)),
            ('cache-link', agent.cache_path, ('state_dir',))):
        link = os.path.join(workdir, name)
        os.symlink(target, link)
        if name == 'etc-dir':
            link = os.path.join(link, 'passwd')
        refused(agent, link, *words)
    # The agent's own files, by name and by a second name.
    refused(agent, agent.cache_path, 'inside the agent\'s state_dir')
    refused(agent, agent.meta_path, 'state_dir')
    hard = os.path.join(workdir, 'cache-hardlink')
    os.link(agent.cache_path, hard)
    refused(agent, hard, 'hard links')
    os.unlink(hard)
    sub = os.path.join(workdir, 'subdir')
    os.mkdir(sub)
    refused(agent, sub, 'a directory')
    # A good origin in the same place still attaches and serves.
    uri = agent.attach('good', fine.path, cache_size=MiB)['export_uri']
    h = om.connect(uri)
    assert not om.verify_all(h, om.Oracle(fine.content))
    om.close(h)
    assert [v['volume_id'] for v in agent.status()['volumes']] == ['good']


@pytest.fixture
def loop_device(workdir):
    if os.geteuid() != 0 or not shutil.which('losetup'):
        pytest.skip('needs root and losetup')
    backing = os.path.join(workdir, 'loop-backing.img')
    with open(backing, 'wb') as f:
        f.truncate(16 * MiB)
    r = subprocess.run(['losetup', '--find', '--show', backing],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        pytest.skip('no loop device: %s' % r.stdout.decode().strip())
    dev = r.stdout.decode().strip()
    yield dev
    subprocess.run(['losetup', '-d', dev])


def test_mounted_block_device_is_refused(make_agent, workdir, loop_device):
    """Engine ucache opens a block device exclusively.

    One that holds a mounted filesystem is refused with the reason, the
    same device unmounted attaches.
    """
    if not shutil.which('mkfs.ext4'):
        pytest.skip('needs mkfs.ext4')
    agent = make_agent(cache_size='8M').start()
    subprocess.run(['mkfs.ext4', '-q', '-F', loop_device], check=True)
    mnt = os.path.join(workdir, 'mnt')
    os.mkdir(mnt)
    subprocess.run(['mount', loop_device, mnt], check=True)
    try:
        refused(agent, loop_device, 'is in use: mounted, or held by another '
                'device or process')
    finally:
        subprocess.run(['umount', mnt], check=True)
    agent.attach('loopvol', loop_device, cache_size=MiB)
    # Held by the agent now: a mount must fail in turn.
    r = subprocess.run(['mount', loop_device, mnt], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode == 0:
        subprocess.run(['umount', mnt])
    assert r.returncode != 0, 'mounted a device the agent serves'
    agent.detach('loopvol')


@pytest.fixture
def os_brick_nodes(loop_device):
    """The loop device under names os-brick gives volumes.

    iSCSI and FC volumes are /dev/sdX, NVMe-oF ones /dev/nvmeXnY: device
    nodes with the loop device's number, made in /dev for the test.
    """
    rdev = os.stat(loop_device).st_rdev
    nodes = []
    for name in ('/dev/sdfcz', '/dev/nvme99n9'):
        if os.path.exists(name):
            os.unlink(name)
        os.mknod(name, 0o600 | stat.S_IFBLK, rdev)
        nodes.append(name)
    yield nodes
    for name in nodes:
        os.unlink(name)


def test_block_device_taken_by_what_it_is(make_agent, workdir, loop_device,
                                          os_brick_nodes):
    """A volume as os-brick names it attaches with the default prefixes.

    The same disk under a second name is refused while the first volume
    caches it (two caches over one disk would each serve their own idea
    of its blocks); after the detach it attaches under that name too.
    """
    sd, nvme = os_brick_nodes
    agent = make_agent(cache_size='8M').start()
    assert '/dev' not in agent.settings['origin_prefixes']
    with open(loop_device, 'rb') as f:
        orc = om.Oracle(f.read())
    uri = agent.attach('iscsi-vol', sd, cache_size=MiB,
                       write_policy='write_through')['export_uri']
    h = om.connect(uri)
    wl = om.Workload(h, orc, seed=5, depth=8)
    wl.run(nops=400, timeout=60)
    wl.assert_clean()
    assert not om.verify_all(h, orc)
    om.close(h)
    for other in (nvme, loop_device):
        err = refused(agent, other, 'is the disk volume iscsi-vol already '
                      'caches', 'detach iscsi-vol first')
        assert err.errno == errno.EEXIST
    agent.detach('iscsi-vol')
    with open(loop_device, 'rb') as f:
        assert not om.compare(orc, f.read(), 'the device after the detach')
    uri = agent.attach('nvme-vol', nvme, cache_size=MiB)['export_uri']
    h = om.connect(uri)
    assert not om.verify_all(h, orc)
    om.close(h)
    agent.detach('nvme-vol')


def test_nbd_socket_confined(agent, workdir, make_origin):
    """An nbd+unix origin's socket is judged like a file origin.

    A server's socket outside ``origin_prefixes`` (a root-only NBD server
    the client could not reach itself), or reached through a link that
    leads out of the prefix, is refused; one inside serves, and the same
    server spelled with a doubled slash is the same disk, refused as a
    second volume.
    """
    outside = tempfile.mkdtemp(prefix='fc-outside-')
    try:
        content = os.urandom(MiB)
        path = os.path.join(outside, 'secret.img')
        with open(path, 'wb') as f:
            f.write(content)
        server = harness.NbdkitOrigin(outside, 'secret', path).start()
        try:
            refused(agent, server.uri, 'NBD socket', 'is not under any of '
                    "the agent's origin_prefixes")
            link = os.path.join(workdir, 'secret.sock')
            os.symlink(server.socket, link)
            refused(agent, 'nbd+unix:///?socket=' + link,
                    'a link must not lead out of its prefix')
        finally:
            server.stop()
    finally:
        shutil.rmtree(outside)
    fine = make_origin(MiB)
    agent.attach('inside', fine.uri, cache_size=MiB)
    doubled = fine.uri.replace(workdir, workdir + '/')
    assert doubled != fine.uri
    err = refused(agent, doubled, 'is the disk volume inside already caches')
    assert err.errno == errno.EEXIST
    agent.detach('inside')


# -- groups -------------------------------------------------------------

class Principal(object):
    """A throwaway user with a primary group and supplementary groups."""

    def __init__(self, name, group, extra=()):
        self.name = name
        subprocess.run(['useradd', '-M', '-N', '-g', group, '-s',
                        '/usr/sbin/nologin'] +
                       (['-G', ','.join(extra)] if extra else []) + [name],
                       check=True)

    def call(self, sock, op, **args):
        """One request on the control socket, as this user."""
        script = ('import json, socket, sys\n'
                  's = socket.socket(socket.AF_UNIX)\n'
                  's.settimeout(20)\n'
                  's.connect(sys.argv[1])\n'
                  's.sendall(sys.argv[2].encode() + b"\\n")\n'
                  'buf = b""\n'
                  'while not buf.endswith(b"\\n"):\n'
                  '    c = s.recv(65536)\n'
                  '    if not c: break\n'
                  '    buf += c\n'
                  'sys.stdout.write(buf.decode())\n')
        req = json.dumps({'op': op, 'args': args})
        r = subprocess.run(['setpriv', '--reuid', self.name, '--regid',
                            self.name_group, '--init-groups',
                            '/usr/bin/python3',
                            '-c', script, sock, req],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        return json.loads(r.stdout.decode())


@pytest.fixture
def principals(workdir):
    if os.geteuid() != 0 or not all(shutil.which(t) for t in (
            'useradd', 'groupadd', 'setpriv')):
        pytest.skip('needs root, useradd, groupadd and setpriv')
    tag = uuid.uuid4().hex[:6]
    readers, admins = 'fcr' + tag, 'fca' + tag
    users, groups = [], []
    try:
        for g in (readers, admins):
            subprocess.run(['groupadd', g], check=True)
            groups.append(g)
        reader = Principal('fcr' + tag + 'u', readers)
        reader.name_group = readers
        users.append(reader.name)
        # Admin through a supplementary group: the agent must look it up.
        admin = Principal('fca' + tag + 'u', readers, extra=(admins,))
        admin.name_group = readers
        users.append(admin.name)
        # The users must reach the socket in the (private) work directory.
        os.chmod(workdir, 0o711)
        yield readers, admins, reader, admin
    finally:
        for u in users:
            subprocess.run(['userdel', u])
        for g in groups:
            subprocess.run(['groupdel', g])


def agent_for_groups(make_agent, readers, admins):
    """A started agent with these control groups.

    Its directory is open to the throwaway users, so that they reach its
    socket.
    """
    agent = make_agent(cache_size='8M', control_group=readers,
                       control_admin_group=admins)
    os.makedirs(agent.dir, exist_ok=True)
    os.chmod(agent.dir, 0o711)
    return agent.start()


def test_readers_read_and_only_admins_change(make_agent, make_origin,
                                             workdir, principals):
    readers, admins, reader, admin = principals
    agent = agent_for_groups(make_agent, readers, admins)
    origin = make_origin(2 * MiB, nbd=False)
    os.chmod(origin.path, 0o600)
    agent.attach('v1', origin.path, cache_size=MiB)
    sock = agent.control_socket

    for op, args in (('agent-status', {}), ('volume-list', {}),
                     ('volume-show', {'volume_id': 'v1'}),
                     ('migration-status', {'migration_id': 'none'})):
        rep = reader.call(sock, op, **args)
        if op == 'migration-status':
            # Allowed, and answered: there is no such migration.
            assert rep['ok'] or rep['errno'] != errno.EPERM, rep
        else:
            assert rep['ok'], (op, rep)
    for op, args in (
            ('volume-attach', {'volume_id': 'v2', 'origin': origin.path}),
            ('volume-detach', {'volume_id': 'v1'}),
            ('volume-detach', {'volume_id': 'v1', 'discard_dirty': True}),
            ('volume-claim', {'volume_id': 'v1'}),
            ('volume-set', {'volume_id': 'v1', 'write_policy': 'write_back'}),
            # Makes a key pair the agent holds for a migration.
            ('migration-key', {'volume_id': 'v9', 'migration_id': 'm'}),
            ('migration-incoming', {'volume_id': 'v9', 'migration_id': 'm',
                                    'token': 'x' * 32}),
            ('migration-abort', {'migration_id': 'm'})):
        rep = reader.call(sock, op, **args)
        assert not rep['ok'] and rep['errno'] == errno.EPERM, (op, rep)
        assert "group '%s' (control_admin_group" % admins in rep['error'], rep
        assert 'changes agent state' in rep['error'], rep
    assert [v['volume_id'] for v in agent.status()['volumes']] == ['v1']
    assert 'refused \'volume-attach\'' in agent.log()

    # An admin (through a supplementary group) may.
    rep = admin.call(sock, 'volume-detach', volume_id='v1')
    assert rep['ok'], rep
    rep = admin.call(sock, 'volume-attach', volume_id='v2',
                     origin=origin.path, cache_size=MiB)
    assert rep['ok'], rep
    assert [v['volume_id'] for v in agent.status()['volumes']] == ['v2']


def test_readers_do_not_see_export_names(make_agent, make_origin, workdir,
                                         principals):
    """An export's name opens it: control_group reads status, not that."""
    readers, admins, reader, admin = principals
    agent = agent_for_groups(make_agent, readers, admins)
    origin = make_origin(2 * MiB, nbd=False)
    uri = agent.attach('v1', origin.path, cache_size=MiB)['export_uri']
    name = parse.urlsplit(uri).path.lstrip('/')
    assert len(name) == 32, uri
    sock = agent.control_socket

    def uris(rep):
        assert rep['ok'], rep
        res = rep['result']
        if 'volumes' in res:
            return [v['export_uri'] for v in res['volumes']]
        return [res['export_uri']]

    for op, args in (('volume-list', {}), ('volume-show', {'volume_id': 'v1'}),
                     ('agent-status', {})):
        rep = reader.call(sock, op, **args)
        assert name not in json.dumps(rep), (op, rep)
        # The socket stays visible: it names the volume, not its key.
        assert uris(rep) == [uri.replace(name, 'REDACTED')], (op, rep)
        assert uris(admin.call(sock, op, **args)) == [uri], op


def test_no_admin_group_means_root_only(make_agent, make_origin, workdir,
                                        principals):
    readers, _, reader, admin = principals
    agent = make_agent(cache_size='8M', control_group=readers)
    os.makedirs(agent.dir, exist_ok=True)
    os.chmod(agent.dir, 0o711)
    agent.start()
    rep = admin.call(agent.control_socket, 'volume-detach', volume_id='x')
    assert not rep['ok'] and rep['errno'] == errno.EPERM, rep
    assert 'control_admin_group is empty' in rep['error'], rep
    assert reader.call(agent.control_socket, 'agent-status')['ok']


def test_admin_group_needs_control_group(make_agent):
    agent = make_agent(control_admin_group='root')
    rc, out = agent.start_expect_failure()
    assert rc != 0
    assert "key 'control_admin_group'" in out, out
    assert 'control_group is empty' in out, out


# ---------------------------------------------------------------------------
# One session per export
# ---------------------------------------------------------------------------

PROBE = '''
import sys
import tempfile
import nbd
h = nbd.NBD()
try:
    h.connect_uri(sys.argv[1])
    sys.stdout.write(h.pread(4096, 0).hex())
except nbd.Error as e:
    sys.stdout.write('refused: %s' % e)
'''


def probe(uri, new_session):
    """Read the first block from another process; its session as asked."""
    r = subprocess.run([sys.executable, '-c', PROBE, uri],
                       stdout=subprocess.PIPE, timeout=60,
                       start_new_session=new_session)
    return r.stdout.decode()


@pytest.mark.parametrize('clients', ['session', 'any'])
def test_export_serves_one_session_at_a_time(make_agent, make_origin,
                                             clients):
    """Another VM's QEMU cannot open an export this VM's QEMU holds.

    Every QEMU runs as the same user, so the socket's mode cannot tell
    them apart; their kernel sessions (libvirt starts each QEMU in its
    own, and no process can join another's) can.  While a client holds
    the export, a process of another session is refused and one of the
    same session (what QEMU forks) is admitted; once the holder is gone,
    the next client may be anyone.  ``export_clients = any`` turns this
    off.
    """
    agent = make_agent(cache_size='8M', export_clients=clients).start()
    origin = make_origin(4 * MiB)
    res = agent.attach('vol1', origin.uri, cache_size=MiB)
    uri = res['export_uri']
    first = origin.content[:4096].hex()

    h = om.connect(uri)
    assert h.pread(4096, 0).hex() == first
    assert probe(uri, new_session=False) == first
    other = probe(uri, new_session=True)
    if clients == 'session':
        assert other.startswith('refused'), other
        assert 'serves one session at a time' in agent.log()
    else:
        assert other == first
    om.close(h)
    del h
    harness.wait_for(lambda: probe(uri, new_session=True) == first, 10,
                     'the export to be free for another session')


@pytest.mark.parametrize('over', ('cache', 'state_file'))
def test_loop_device_over_our_files_is_refused(make_agent, over):
    """A loop device over the cache file, or over a file in state_dir.

    It has no slaves in sysfs, only a backing file: the agent follows
    loop/backing_file and refuses it as it refuses the files themselves.
    """
    agent = make_agent(cache_size='8M').start()
    if over == 'cache':
        backing = agent.cache_path
    else:
        backing = os.path.join(agent.state_dir, 'planted.img')
        with open(backing, 'wb') as f:
            f.truncate(4 * MiB)
    dev = subprocess.run(['losetup', '--find', '--show', backing],
                         check=True, stdout=subprocess.PIPE,
                         text=True).stdout.strip()
    try:
        refused(agent, dev, 'is a loop device over the agent\'s cache',
                'state_dir')
    finally:
        subprocess.run(['losetup', '-d', dev], check=True)
    assert agent.status()['volumes'] == []
