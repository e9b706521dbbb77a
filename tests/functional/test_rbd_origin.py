# SPDX-License-Identifier: Apache-2.0
"""Ceph RBD origins, against a real cluster (tests/functional/ceph.py).

The agent opens ``rbd:POOL/IMAGE:id=...:keyring=...:mon_host=...`` with
librbd, cephx on, msgr2 in secure mode.  What a VM writes through the
export is checked against the oracle, then read back from the image by
``rbd export`` (another client than the agent's): every acknowledged write
is in the image once the volume is detached.  The image's exclusive lock
keeps every other client from writing while the agent has the volume,
and moves to the destination with a live migration, whatever the
strategy.
"""

import errno
import json
import os
import shutil
import socket
import tempfile
import threading
import time

import pytest
import rbd

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

from . import ceph
from .test_block_status import qemu_map
from .test_migration import check_after
from .test_migration import migrate_with_vm
from .test_migration import roll_back
from .test_volume_move import abort_with_target_stopped

ceph_box = ceph.ceph_box

MiB = 1 << 20
BS = 4096
VOLUME_SIZE = 32 * MiB
POLICIES = ('read_only', 'write_through', 'write_back')
STRATEGIES = ('none', 'cachemior', 'firepan', 'firepan_if', 'cloudcache',
              'hybrid')


class RbdOrigin(object):
    """An image with known content; ``uri`` is the agent's origin."""

    def __init__(self, box, name, content, keyring=None, **options):
        self.box = box
        self.name = name
        self.content = content
        self.size = len(content)
        opts = [('id', 'cinder'), ('keyring', keyring or box.cinder_keyring),
                ('mon_host', box.mon_host)]
        opts += sorted(options.items())
        self.uri = 'rbd:%s/%s%s' % (box.pool, name, ''.join(
            ':%s=%s' % (k, v.replace(':', '\\:')) for k, v in opts))

    def read_file(self):
        return self.box.image_bytes(self.name)


def make_image(box, workdir, name, size=VOLUME_SIZE, seed=1,
               filled_fraction=0.5):
    """An image holding random data in part of it.

    Written chunk by chunk: chunks of zeroes are left unallocated.
    """
    path = os.path.join(workdir, name + '.content')
    content = harness.make_origin_file(path, size, seed=seed,
                                       filled_fraction=filled_fraction)
    os.unlink(path)
    box.create_image(name, size)
    with box.ioctx() as io:
        with rbd.Image(io, name) as image:
            for off in range(0, size, MiB):
                chunk = content[off:off + MiB]
                if chunk.count(0) != len(chunk):
                    image.write(bytes(chunk), off)
            image.flush()
    return RbdOrigin(box, name, content)


def rbd_agent(make_agent, box, name='agent', **config):
    config.setdefault('cache_size', '32M')
    return make_agent(name=name, origin_rbd_dirs=box.dir + '/', **config)


_names = iter(range(1, 1 << 30))


def image_name(prefix='vol'):
    return '%s-%d-%d' % (prefix, os.getpid(), next(_names))


def third_client_write(box, name, timeout=15):
    """Another librbd client writes one block: the error, or None."""
    try:
        with box.client(timeout=timeout) as cluster:
            io = cluster.open_ioctx(box.pool)
            try:
                with rbd.Image(io, name) as image:
                    image.write(b'\xee' * BS, 0)
                    image.flush()
            finally:
                io.close()
    except Exception as exc:
        return exc
    return None


def verify_and_detach(agent, h, orc, image, when):
    """Reads through the export, then the image after detach, are the oracle.

    Every acknowledged write is in both.
    """
    mism = om.verify_all(h, orc, 'verify %s' % when)
    assert not mism, mism
    om.close(h)
    agent.detach('vol1')
    mism = om.compare(orc, image.read_file(), 'image after detach (%s)' % when)
    assert not mism, mism


# ---------------------------------------------------------------------------
# I/O
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('depth', (1, 32))
@pytest.mark.parametrize('policy', POLICIES)
def test_rbd_volume_io(make_agent, ceph_box, workdir, policy, depth):
    """Oracle-checked I/O at a queue depth; detach leaves it in the image."""
    origin = make_image(ceph_box, workdir, image_name())
    agent = rbd_agent(make_agent, ceph_box, writeback_interval_ms=200).start()
    res = agent.attach('vol1', origin.uri, cache_size=8 * MiB,
                       write_policy=policy)
    orc = om.Oracle(origin.content)
    h = om.connect(res['export_uri'])
    wl = om.Workload(h, orc, seed=depth, depth=depth)
    wl.run(nops=1500)
    wl.flush()
    wl.assert_clean()
    mism = om.verify_all(h, orc, 'verify through the export')
    assert not mism, mism
    om.close(h)
    if policy == 'write_through':
        # Acknowledged and flushed: in the image while still attached.
        mism = om.compare(orc, origin.read_file(), 'image, attached')
        assert not mism, mism
    agent.detach('vol1')
    mism = om.compare(orc, origin.read_file(), 'image after detach')
    assert not mism, mism
    agent.assert_alive()


def test_rbd_block_status_and_sparse_zeroes(make_agent, ceph_box, workdir):
    """The export reports the image's holes; zeroes written stay holes."""
    name = image_name()
    ceph_box.create_image(name, 16 * MiB)
    ceph_box.write_image(name, os.urandom(2 * MiB), 4 * MiB)
    origin = RbdOrigin(ceph_box, name, bytes(16 * MiB))
    agent = rbd_agent(make_agent, ceph_box).start()
    res = agent.attach('vol1', origin.uri, write_policy='write_through')
    data = [(s, n) for s, n, d, _ in qemu_map(res['export_uri']) if d]
    assert data, 'no data reported'
    assert sum(n for _, n in data) <= 4 * MiB, data
    assert any(s <= 4 * MiB < s + n for s, n in data), data
    # 8 MiB of zeroes written with the hole allowed: nothing allocated.
    h = om.connect(res['export_uri'])
    h.zero(8 * MiB, 8 * MiB)
    h.flush()
    om.close(h)
    agent.detach('vol1')
    du = ceph_box.rbd('du', '--format', 'json', '%s/%s' % (ceph_box.pool,
                                                           name))
    assert du.returncode == 0, du.stderr
    used = json.loads(du.stdout)['images'][0]['used_size']
    assert used <= 4 * MiB, used


# ---------------------------------------------------------------------------
# The exclusive lock
# ---------------------------------------------------------------------------

def test_rbd_lock_keeps_other_writers_out(make_agent, ceph_box, workdir):
    origin = make_image(ceph_box, workdir, image_name())
    agent = rbd_agent(make_agent, ceph_box).start()
    res = agent.attach('vol1', origin.uri, write_policy='write_through')
    orc = om.Oracle(origin.content)
    h = om.connect(res['export_uri'])
    wl = om.Workload(h, orc, seed=3, depth=8)
    wl.run(nops=300)
    wl.assert_clean()
    # The agent has written: the lock is its own, and nobody else writes.
    exc = third_client_write(ceph_box, origin.name)
    assert exc is not None, 'another client wrote the image the agent caches'
    mism = om.verify_all(h, orc, 'verify after the refused write')
    assert not mism, mism
    om.close(h)
    mism = om.compare(orc, origin.read_file(), 'image')
    assert not mism, mism
    # Detached: the image is anyone's again.
    agent.detach('vol1')
    assert third_client_write(ceph_box, origin.name) is None


def test_rbd_extend_in_use(make_agent, ceph_box, workdir):
    """Cinder's extend of an image the agent holds the lock of, then ours.

    Cinder's RBD driver resizes the image with librbd; the agent, which
    holds the exclusive lock, carries the resize out for it (librbd's
    maintenance requests), and volume-extend serves the new size.
    """
    origin = make_image(ceph_box, workdir, image_name(), size=16 * MiB)
    agent = rbd_agent(make_agent, ceph_box, writeback_interval_ms=200).start()
    res = agent.attach('vol1', origin.uri, cache_size=8 * MiB,
                       write_policy='write_back')
    orc = om.Oracle(origin.content)
    old = om.connect(res['export_uri'])
    om.Workload(old, orc, seed=5, depth=8).run(nops=200).assert_clean()
    with ceph_box.ioctx() as io:
        with rbd.Image(io, origin.name) as image:
            image.resize(24 * MiB)
    assert agent.client().extend_volume('vol1')['size'] == 24 * MiB
    orc.grow(24 * MiB)
    h = om.connect(res['export_uri'])
    assert h.get_size() == 24 * MiB
    om.Workload(h, orc, seed=6, depth=8,
                region=(8 * MiB, 24 * MiB)).run(nops=200).assert_clean()
    om.close(old)
    verify_and_detach(agent, h, orc, origin, 'after the extend')


# ---------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------

def test_rbd_files_confined(make_agent, ceph_box, workdir):
    """conf and keyring only from origin_rbd_dirs, and a safe conf.

    A conf only if root's and not writable by others; no librados option
    but the four.
    """
    name = image_name()
    ceph_box.create_image(name, 4 * MiB)
    agent = rbd_agent(make_agent, ceph_box).start()
    outside = os.path.join(workdir, 'cinder.keyring')
    shutil.copy(ceph_box.cinder_keyring, outside)
    cases = [
        (RbdOrigin(ceph_box, name, b'', keyring=outside).uri,
         'origin_rbd_dirs'),
        ('rbd:%s/%s:id=cinder:log_file=/etc/passwd' % (ceph_box.pool, name),
         "unknown option 'log_file'"),
        ('rbd:%s/%s@snap' % (ceph_box.pool, name), 'snapshot'),
    ]
    loose = os.path.join(ceph_box.dir, 'loose.conf')
    shutil.copy(ceph_box.conf, loose)
    os.chmod(loose, 0o666)
    cases.append((RbdOrigin(ceph_box, name, b'', conf=loose).uri,
                  'not owned by root or is writable'))
    for uri, why in cases:
        with pytest.raises(Exception) as ei:
            agent.attach('vol1', uri)
        assert why in harness.control_error_text(ei.value), (
            uri, harness.control_error_text(ei.value))
    os.unlink(loose)
    agent.assert_alive()
    assert agent.status()['volumes'] == []


def test_rbd_wrong_key_refused_quickly(make_agent, ceph_box, workdir):
    name = image_name()
    ceph_box.create_image(name, 4 * MiB)
    bad = os.path.join(ceph_box.dir, 'wrong.keyring')
    with open(bad, 'w') as f:
        f.write('[client.cinder]\n\tkey = '
                'AQBxqDJlAAAAABAAm8ybYr1fQnR2xNfQm7bXgw==\n')
    agent = rbd_agent(make_agent, ceph_box).start()
    t0 = time.monotonic()
    with pytest.raises(Exception) as ei:
        agent.attach('vol1', RbdOrigin(ceph_box, name, b'', keyring=bad).uri)
    took = time.monotonic() - t0
    text = harness.control_error_text(ei.value)
    assert 'cannot connect to the Ceph cluster' in text, text
    assert took < 20, took
    os.unlink(bad)


def test_rbd_same_image_once(make_agent, ceph_box, workdir):
    """The same image under another spelling is the same volume."""
    origin = make_image(ceph_box, workdir, image_name(), size=4 * MiB)
    agent = rbd_agent(make_agent, ceph_box).start()
    agent.attach('vol1', origin.uri)
    other = RbdOrigin(ceph_box, origin.name, b'', conf=ceph_box.conf).uri
    with pytest.raises(Exception) as ei:
        agent.attach('vol2', other)
    assert 'one disk has one cache' in str(ei.value), ei.value
    assert ei.value.errno == errno.EEXIST, ei.value
    agent.detach('vol1')


# ---------------------------------------------------------------------------
# The origin dies and comes back
# ---------------------------------------------------------------------------

@pytest.mark.timeout(180)
@pytest.mark.parametrize('policy', ('write_through', 'write_back'))
def test_rbd_osd_killed_and_restarted(make_agent, ceph_box, workdir, policy):
    """The OSD is SIGKILLed under load and started again.

    Requests wait for it (within librados' 30 s) and nothing acknowledged
    is lost.
    """
    origin = make_image(ceph_box, workdir, image_name())
    agent = rbd_agent(make_agent, ceph_box, writeback_interval_ms=50).start()
    res = agent.attach('vol1', origin.uri, cache_size=4 * MiB,
                       write_policy=policy)
    orc = om.Oracle(origin.content)
    h = om.connect(res['export_uri'])
    wl = om.Workload(h, orc, seed=7, depth=16)
    stop = threading.Event()
    runner = threading.Thread(target=wl.run,
                              kwargs={'stop': stop, 'timeout': 150})
    runner.start()
    try:
        time.sleep(1.0)
        ceph_box.kill_osd()
        time.sleep(2.0)
        ceph_box.start_osd()
        time.sleep(1.0)
    finally:
        stop.set()
        runner.join(120)
    assert not runner.is_alive(), 'the workload hung'
    wl.flush()
    wl.assert_clean()
    verify_and_detach(agent, h, orc, origin, 'after the OSD restart')


# ---------------------------------------------------------------------------
# Live migration
# ---------------------------------------------------------------------------

@pytest.mark.timeout(120)
@pytest.mark.parametrize('strategy', STRATEGIES)
def test_rbd_migrate_under_load(make_agent, ceph_box, workdir, strategy):
    """Every strategy moves an RBD volume (write_back) between agents.

    The lock goes with it, and nobody else writes meanwhile.
    """
    def make_origin(size, seed=1):
        return make_image(ceph_box, workdir, image_name('mig'), size=size,
                          seed=seed)

    def make_rbd_agent(name='agent', **config):
        return rbd_agent(make_agent, ceph_box, name=name, **config)

    src, dst, origin, orc, vm, uri = mu.setup_source(
        make_rbd_agent, make_origin, 'write_back')
    # A write to this OSD (a bluestore file, a sync per commit) takes
    # milliseconds: the warm-up can leave more of the cache dirty than on
    # test_migration's NBD origin, and dirty blocks are not evicted.  Let
    # writeback bring it down to its threshold (dirty_high_percent) so
    # that the hot set fits.
    quota = src.show('vol1')['quota_blocks']
    harness.wait_for(lambda: src.show('vol1')['dirty_blocks'] <= quota // 4,
                     60, 'writeback to bring the dirty blocks down')
    assert third_client_write(ceph_box, origin.name) is not None
    seen = {'policy': 'write_back'}
    try:
        migrate_with_vm(src, dst, orc, vm, uri, strategy, seen)
    except BaseException:
        roll_back(src, dst, seen)
        raise
    finally:
        vm.pause()
    # The VM wrote through the destination after the switchover, which
    # needed the lock: the source gave it up.  Nobody else has it.
    assert vm.wl.modify_completions > 0
    assert third_client_write(ceph_box, origin.name) is not None
    check_after(src, dst, origin, orc, vm, seen)


class LoopbackSniffer(object):
    """Every byte that crosses the loopback interface, while it runs."""

    def __init__(self, limit=256 * MiB):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                  socket.htons(3))          # ETH_P_ALL
        self.sock.bind(('lo', 0))
        self.sock.settimeout(0.1)
        self.seen = bytearray()
        self.limit = limit
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_event.is_set() and len(self.seen) < self.limit:
            try:
                self.seen += self.sock.recv(1 << 17)
            except socket.timeout:
                pass

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(5)
        self.sock.close()


@pytest.mark.parametrize('mode', ('secure', 'crc'))
def test_rbd_data_on_the_wire(make_agent, ceph_box, workdir, mode):
    """Tenant data crosses the storage network encrypted (the default).

    A recognisable block written through the export travels to the OSD;
    the loopback traffic meanwhile holds it only in crc mode, which shows
    that the capture would have seen it.
    """
    name = image_name('wire')
    ceph_box.create_image(name, 4 * MiB)
    origin = RbdOrigin(ceph_box, name, bytes(4 * MiB))
    agent = rbd_agent(make_agent, ceph_box, origin_rbd_ms_mode=mode).start()
    res = agent.attach('vol1', origin.uri, write_policy='write_through')
    secret = os.urandom(BS)
    h = om.connect(res['export_uri'])
    with LoopbackSniffer() as sniffer:
        h.pwrite(secret, 1 * MiB)
        h.flush()
        time.sleep(0.2)
    om.close(h)
    agent.detach('vol1')
    image = origin.read_file()
    assert image[MiB:MiB + BS] == secret
    in_clear = secret[1024:1088] in sniffer.seen
    assert len(sniffer.seen) > BS, len(sniffer.seen)
    assert in_clear == (mode == 'crc'), (mode, len(sniffer.seen))


# ---------------------------------------------------------------------------
# Storage moves between images
# ---------------------------------------------------------------------------

MOVE_SIZE = 8 * MiB


@pytest.mark.parametrize('scheme', ('dbt', 'mirror', 'lr', 'slr', 'aio'))
def test_rbd_move_between_images(make_agent, ceph_box, workdir, scheme):
    """A storage move from one RBD image to another, under load.

    B ends with every acknowledged write and holds the lock; A is let go
    (another client may write it again).
    """
    a = make_image(ceph_box, workdir, image_name('a'), size=MOVE_SIZE)
    b = make_image(ceph_box, workdir, image_name('b'), size=MOVE_SIZE, seed=2,
                   filled_fraction=0.3)
    agent = rbd_agent(make_agent, ceph_box, writeback_interval_ms=50).start()
    res = agent.attach('vol1', a.uri, cache_size=2 * MiB,
                       write_policy='write_through')
    orc = om.Oracle(a.content)
    h = om.connect(res['export_uri'])
    wl = om.Workload(h, orc, seed=5, depth=8, max_length=32768,
                     hot_fraction=0.25 if scheme == 'dbt' else 1.0,
                     hot_share=1.0)
    wl.run(nops=100)
    client = agent.client()
    client.call('volume-move', volume_id='vol1', to=b.uri, scheme=scheme,
                rate_limit_mbps=20)
    deadline = time.monotonic() + 60
    while True:
        wl.run(duration=0.2)
        st = client.call('volume-move-status', volume_id='vol1')
        if st['state'] in ('done', 'failed', 'aborted'):
            break
        assert time.monotonic() < deadline, st
    wl.assert_clean()
    assert st['state'] == 'done', st
    assert agent.show('vol1')['origin'] == b.uri
    # B is the agent's: its lock is held.  A is nobody's any more.
    assert third_client_write(ceph_box, b.name) is not None
    assert third_client_write(ceph_box, a.name) is None
    wl.run(nops=100)
    wl.assert_clean()
    verify_and_detach(agent, h, orc, b, 'after the move')


# ---------------------------------------------------------------------------
# The agent restarts
# ---------------------------------------------------------------------------

@pytest.mark.timeout(180)
@pytest.mark.parametrize('how', ('restart', 'kill'))
def test_rbd_agent_restart(make_agent, ceph_box, workdir, how):
    """The agent stops (cleanly or SIGKILL) holding the image's lock.

    The restarted agent serves the volume again and its first write takes
    the lock back: a dead agent's lock is broken once Ceph sees its
    session gone, and the write waits for that instead of failing.
    """
    origin = make_image(ceph_box, workdir, image_name('restart'))
    agent = rbd_agent(make_agent, ceph_box).start()
    res = agent.attach('vol1', origin.uri, cache_size=8 * MiB,
                       write_policy='write_through')
    orc = om.Oracle(origin.content)
    h = om.connect(res['export_uri'])
    wl = om.Workload(h, orc, seed=9, depth=8)
    wl.run(nops=300)
    wl.assert_clean()
    om.close(h)
    if how == 'kill':
        agent.kill()
        agent.start()
    else:
        agent.restart()
    show = agent.show('vol1')
    assert show['origin'] == origin.uri
    h = om.connect(show['export_uri'])
    wl.h = h
    t0 = time.monotonic()
    wl.run(nops=300, timeout=120)
    took = time.monotonic() - t0
    wl.flush()
    wl.assert_clean()
    print('%s: 300 requests after the restart in %.1f s' % (how, took))
    # Nobody else writes meanwhile: the restarted agent holds the lock.
    assert third_client_write(ceph_box, origin.name) is not None
    verify_and_detach(agent, h, orc, origin, 'after the restart')


@pytest.fixture(scope='module')
def other_box():
    """A second cluster: a move target whose OSD can stop alone."""
    box = ceph.CephBox(tempfile.mkdtemp(prefix='ceph-', dir='/tmp'))
    try:
        yield box.start()
    finally:
        box.stop()
        shutil.rmtree(box.dir, ignore_errors=True)


def test_rbd_move_abort_with_target_stopped(make_agent, ceph_box, other_box,
                                            workdir):
    """The move target's OSD stops (SIGSTOP) mid-copy.

    move-abort answers within a second (librbd requests to it are given up,
    not waited for: librados would wait 30 s), the VM's writes go on on A,
    and A holds every acknowledged write.
    """
    a = make_image(ceph_box, workdir, image_name('a'), size=MOVE_SIZE)
    other_box.create_image('b', MOVE_SIZE)
    b = RbdOrigin(other_box, 'b', bytes(MOVE_SIZE))
    dirs = '%s/,%s/' % (ceph_box.dir, other_box.dir)
    agent = make_agent(cache_size='32M', writeback_interval_ms=50,
                       origin_rbd_dirs=dirs).start()
    res = agent.attach('vol1', a.uri, cache_size=2 * MiB,
                       write_policy='write_through')
    orc = om.Oracle(a.content)
    h = om.connect(res['export_uri'])
    wl = om.Workload(h, orc, seed=6, depth=8, max_length=32768)
    wl.run(nops=50)
    client = agent.client()
    client.call('volume-move', volume_id='vol1', to=b.uri, scheme='mirror',
                rate_limit_mbps=2)
    time.sleep(0.5)
    st = client.call('volume-move-status', volume_id='vol1')
    assert st['state'] == 'copying', st
    with open(os.path.join(other_box.dir, 'run', 'osd.0.pid')) as f:
        osd = int(f.read())
    abort_with_target_stopped(agent, wl, osd, join_s=10)
    wl.assert_clean()
    assert agent.show('vol1')['origin'] == a.uri
    verify_and_detach(agent, h, orc, a, 'after the abort')
