# SPDX-License-Identifier: Apache-2.0
"""The export tells QEMU what the origin knows, as nbdkit does.

The reference is nbdkit serving the very file the agent caches (as
test_block_status.py does): what ``qemu-img`` / ``qemu-io`` / libnbd see
through the agent's export must be what they see through nbdkit.

* Block status: a volume with 26 MiB of data in 64 MiB (16 KiB extents,
  not the 1 MiB chunks of test_block_status.py) maps alike, with 4 KiB
  and with 64 KiB cache blocks; so does one ``qemu-img convert -n`` wrote.
* WRITE_ZEROES keeps the origin sparse where the client allowed holes
  (``qemu-io write -z -u``) and allocates where it did not (``write -z``:
  NBD_CMD_FLAG_NO_HOLE), under every write policy, on files, NBD servers
  and block devices; the cache never serves what the zeroes replaced, and
  an origin that loses them in a restart gets them again.
* An export whose size is not a multiple of 512 (nor of the cache block)
  is readable and writable to its last byte by QEMU; its partial last
  block is cached, and moves in a migration, without a byte past the
  origin's end.
* A request the origin could not serve is EIO on the wire, never
  ESHUTDOWN (which tells the client the export itself is going away).
"""

import errno
import os
import random
import shutil
import subprocess

import nbd
import pytest

from fcache_testkit import harness
from fcache_testkit import oracle as om

from .conftest import _require
from .test_block_status import qemu_map
from .test_block_status import run

MiB = 1 << 20
KiB = 1 << 10
POLICIES = ('read_only', 'write_through', 'write_back')


def data_bytes(uri):
    """What ``qemu-img map`` calls data, in bytes."""
    return sum(length for _, length, data, _ in qemu_map(uri) if data)


def allocated(path):
    return os.stat(path).st_blocks * 512


def origin_source(origin, kind):
    return origin.server.uri if kind == 'nbd' else origin.path


@pytest.mark.parametrize('block_size', ['4K', '64K'])
@pytest.mark.parametrize('kind', ['path', 'nbd'])
def test_map_of_scattered_data_matches_nbdkit(make_agent, make_origin,
                                              workdir, kind, block_size):
    """26 MiB of data in 16 KiB extents map alike through both servers.

    Also with cache blocks larger than the extents: the origin's map holds
    inside a block the cache does not hold dirty.
    """
    _require('qemu-img')
    path = os.path.join(workdir, 'scattered.img')
    rng = random.Random(5)
    with open(path, 'wb') as f:
        f.truncate(64 * MiB)
        for ext in rng.sample(range(64 * MiB // (16 * KiB)), 26 * 64):
            f.seek(ext * 16 * KiB)
            f.write(rng.randbytes(16 * KiB))
    server = harness.NbdkitOrigin(workdir, 'scattered', path).start()
    try:
        agent = make_agent(block_size=block_size).start()
        src = server.uri if kind == 'nbd' else path
        for policy in POLICIES:
            uri = agent.attach('v', src, cache_size=8 * MiB,
                               write_policy=policy)['export_uri']
            assert data_bytes(uri) == data_bytes(server.uri) == 26 * MiB
            agent.detach('v')
    finally:
        server.stop()


@pytest.mark.parametrize('kind', ['path', 'nbd'])
def test_convert_into_the_export_keeps_its_holes(make_agent, make_origin,
                                                 workdir, kind):
    """A volume written by ``qemu-img convert -n`` keeps the image's holes.

    The image holds 26 MiB of data in 64 MiB: the holes arrive as zeroes
    the origin may punch, so the volume then maps as 26 MiB of data, as
    nbdkit sees its file.
    """
    _require('qemu-img')
    image = os.path.join(workdir, 'image.raw')
    rng = random.Random(6)
    with open(image, 'wb') as f:
        f.truncate(64 * MiB)
        for ext in rng.sample(range(64), 26):
            f.seek(ext * MiB)
            f.write(rng.randbytes(MiB))
    origin = make_origin(64 * MiB, filled_fraction=1.0)
    agent = make_agent().start()
    uri = agent.attach('v', origin_source(origin, kind), cache_size=8 * MiB,
                       write_policy='write_through')['export_uri']
    run(['qemu-img', 'convert', '-n', '-f', 'raw', '-O', 'raw', image, uri],
        timeout=120)
    assert data_bytes(uri) == data_bytes(origin.server.uri) == 26 * MiB
    assert allocated(origin.path) <= 27 * MiB
    with open(image, 'rb') as f:
        assert origin.read_file() == f.read()


# -- WRITE_ZEROES ------------------------------------------------------------

@pytest.mark.parametrize('kind', ['path', 'nbd'])
@pytest.mark.parametrize('policy', POLICIES)
def test_write_zeroes_keeps_the_origin_sparse(make_agent, make_origin, kind,
                                              policy):
    """1 MiB of data and 15 MiB of zeroes allocate 1 MiB, as via nbdkit."""
    _require('qemu-io')
    agent = make_agent(writeback_interval_ms=50).start()
    origin = make_origin(16 * MiB, filled_fraction=1.0)
    uri = agent.attach('v', origin_source(origin, kind), cache_size=8 * MiB,
                       write_policy=policy)['export_uri']
    h = om.connect(uri)
    om.read_all(h, 8 * MiB)     # clean blocks in the cache, to be zeroed
    om.close(h)
    run(['qemu-io', '-f', 'raw', '-c', 'write -P 0x55 0 1M',
         '-c', 'write -z -u 1M 15M', '-c', 'flush', uri])
    # What the cache serves: the zeroes, not the blocks they replaced.
    run(['qemu-io', '-f', 'raw', '-c', 'read -P 0x55 0 1M',
         '-c', 'read -P 0 1M 15M', uri])
    agent.detach('v')           # write_back: dirty blocks reach the origin
    content = origin.read_file()
    assert content[:MiB] == b'\x55' * MiB
    assert content[MiB:] == bytes(15 * MiB)
    assert allocated(origin.path) <= 2 * MiB, allocated(origin.path)


@pytest.mark.parametrize('kind', ['path', 'nbd'])
def test_write_zeroes_no_hole_allocates(make_agent, make_origin, kind):
    """NBD_CMD_FLAG_NO_HOLE (qemu-io write -z without -u): allocated."""
    _require('qemu-io')
    agent = make_agent().start()
    origin = make_origin(8 * MiB, filled_fraction=0.0)
    uri = agent.attach('v', origin_source(origin, kind), cache_size=4 * MiB,
                       write_policy='write_through')['export_uri']
    assert allocated(origin.path) == 0
    run(['qemu-io', '-f', 'raw', '-c', 'write -z 1M 4M', '-c', 'flush', uri])
    run(['qemu-io', '-f', 'raw', '-c', 'read -P 0 0 8M', uri])
    agent.detach('v')
    assert allocated(origin.path) >= 4 * MiB
    assert origin.read_file() == bytes(8 * MiB)


@pytest.mark.parametrize('policy', POLICIES)
def test_write_zeroes_over_cached_and_dirty_blocks(make_agent, make_origin,
                                                   policy):
    """Zeroes over clean, dirty and uncached blocks read as the oracle.

    Whole and partial blocks, with and without NO_HOLE and FUA: every read
    equals the oracle, and so does the origin once the volume is detached.
    """
    agent = make_agent(writeback_interval_ms=600000).start()
    origin = make_origin(8 * MiB, filled_fraction=0.6)
    uri = agent.attach('v', origin.server.uri, cache_size=4 * MiB,
                       write_policy=policy)['export_uri']
    orc = om.Oracle(origin.content)
    h = om.connect(uri)
    om.read_all(h, 4 * MiB)
    rng = random.Random(7)
    for i in range(40):
        off = rng.randrange(0, 8 * MiB // 512 - 1) * 512
        length = min(rng.choice([512, 4 * KiB, 12 * KiB + 512, 300 * KiB]),
                     8 * MiB - off)
        if i % 2:
            data = rng.randbytes(length)
            h.pwrite(data, off)
            orc.write(off, data)
        else:
            flags = rng.choice([0, nbd.CMD_FLAG_NO_HOLE, nbd.CMD_FLAG_FUA])
            h.zero(length, off, flags)
            orc.zero(off, length)
    assert not om.verify_all(h, orc)
    om.close(h)
    agent.detach('v')
    assert not om.compare(orc, origin.read_file(), 'origin after detach')


# -- sizes that are not a multiple of 512 or of the cache block ---------------

@pytest.mark.parametrize('kind', ['path', 'nbd'])
@pytest.mark.parametrize('size', [MiB + 1000, MiB + 4608])
def test_unaligned_size_readable_and_writable_to_its_end(
        make_agent, make_origin, workdir, kind, size):
    _require('qemu-io', 'qemu-img')
    path = os.path.join(workdir, 'odd.img')
    content = bytearray(os.urandom(size))
    with open(path, 'wb') as f:
        f.write(content)
    server = harness.NbdkitOrigin(workdir, 'odd', path).start()
    try:
        # 64 KiB cache blocks: the last one is partial for both sizes.
        agent = make_agent(block_size='64K').start()
        src = server.uri if kind == 'nbd' else path
        for policy in POLICIES:
            uri = agent.attach('v', src, cache_size=4 * MiB,
                               write_policy=policy)['export_uri']
            last = '0x%02x' % content[-1]
            for u in (server.uri, uri):
                out = run(['qemu-io', '-f', 'raw', '-c',
                           'read -P %s %d 1' % (last, size - 1), u])
                assert 'read 1/1 bytes' in out, out
            copies = []
            for u in (server.uri, uri):
                copies.append(os.path.join(workdir, 'copy%d.img' %
                                           len(copies)))
                run(['qemu-img', 'convert', '-f', 'raw', '-O', 'raw', u,
                     copies[-1]])
            with open(copies[0], 'rb') as f, open(copies[1], 'rb') as g:
                ref = f.read()
                assert ref[:size] == content    # QEMU pads to 512
                assert g.read() == ref
            # Writes at the tail, through QEMU (a read-modify-write of the
            # last sector) and through libnbd; then read back and detached.
            byte = (content[-1] + 1) % 256
            run(['qemu-io', '-f', 'raw', '-c',
                 'write -P %d %d 1' % (byte, size - 1),
                 '-c', 'read -P %d %d 1' % (byte, size - 1), uri])
            content[-1] = byte
            h = om.connect(uri, strict=False)
            tail = (size - 1) // 512 * 512
            data = os.urandom(size - tail)
            h.pwrite(data, tail)
            content[tail:] = data
            blk = size // (64 * KiB) * 64 * KiB
            assert h.pread(size - blk, blk) == bytes(content[blk:])
            assert h.pread(4096, size - 4096) == bytes(content[-4096:])
            om.close(h)
            agent.detach('v')
            with open(path, 'rb') as f:
                assert f.read() == content, policy
    finally:
        server.stop()


# -- errors ------------------------------------------------------------------

@pytest.mark.parametrize('policy', POLICIES)
def test_origin_shutdown_is_eio_on_the_wire(make_agent, make_origin, policy):
    """An origin answering ESHUTDOWN is an I/O error of this export.

    The origin is stopping, not this export, which goes on: the client
    must not hear that the export is shutting down.
    """
    origin = make_origin(4 * MiB, filters=['error'],
                         filter_args=['error=ESHUTDOWN',
                                      'error-pread-rate=100%',
                                      'error-pwrite-rate=100%',
                                      'error-zero-rate=100%'])
    agent = make_agent().start()
    uri = agent.attach('v', origin.server.uri, cache_size=2 * MiB,
                       write_policy=policy)['export_uri']
    h = om.connect(uri)
    ops = [('read', lambda: h.pread(4096, 0)),
           ('write around the cache', lambda: h.pwrite(b'x' * 512, 512)),
           ('zero', lambda: h.zero(4096, 8192))]
    for what, fn in ops:
        with pytest.raises(nbd.Error) as exc:
            fn()
        assert exc.value.errnum == errno.EIO, (what, exc.value)
    om.close(h)
    agent.assert_alive()


@pytest.mark.parametrize('policy', ['write_through', 'write_back'])
def test_origin_restart_keeps_acknowledged_zeroes(make_agent, make_origin,
                                                  policy):
    """Zeroes sent as NBD_CMD_WRITE_ZEROES are in the origin's redo log.

    Like writes (test_origin_faults.py plays writes): an origin that loses
    them in a restart gets them again before the VM's FLUSH succeeds.
    """
    origin = make_origin(8 * MiB, filled_fraction=1.0, filters=['cache'],
                         filter_args=['cache=writeback'])
    agent = make_agent(writeback_interval_ms=3600000,
                       dirty_high_percent=100,
                       origin_connections=1).start()
    uri = agent.attach('v', origin.server.uri, cache_size=4 * MiB,
                       write_policy=policy)['export_uri']
    orc = om.Oracle(origin.content)
    h = om.connect(uri)
    rng = random.Random(3)
    for i in range(12):
        off = rng.randrange(0, 7 * MiB // 4096) * 4096 + (i % 3) * 512
        length = rng.choice([64 * KiB, 300 * KiB, MiB])
        flags = nbd.CMD_FLAG_NO_HOLE if i % 2 else 0
        h.zero(length, off, flags)
        orc.zero(off, length)
    origin.server.proc.kill()
    origin.server.proc.wait(10)
    assert om.compare(orc, origin.read_file(), 'origin file after the kill')
    origin.server.start()
    harness.wait_for(lambda: 're-established' in agent.log(), 20,
                     'the origin connection to be re-established')
    h.flush()
    assert not om.compare(orc, origin.read_file(), 'origin after FLUSH')
    assert not om.verify_all(h, orc)
    om.close(h)
    assert 'wrote again' in agent.log()


@pytest.fixture
def loop_device(workdir):
    """A loop device over a file with data in all of it."""
    if os.geteuid() != 0 or not shutil.which('losetup'):
        pytest.skip('needs root and losetup')
    backing = os.path.join(workdir, 'loop-backing.img')
    with open(backing, 'wb') as f:
        f.write(os.urandom(16 * MiB))
    r = subprocess.run(['losetup', '--find', '--show', backing],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        pytest.skip('no loop device: %s' % r.stdout.decode().strip())
    dev = r.stdout.decode().strip()
    yield dev, backing
    subprocess.run(['losetup', '-d', dev])


def test_write_zeroes_on_a_block_device(make_agent, loop_device):
    """A block device origin zeroes with a discard or BLKZEROOUT.

    Zeroes the client allows to be a hole are a discard that guarantees
    them (the loop device punches its file), the others BLKZEROOUT; both
    read back as zeroes, through the cache too.
    """
    _require('qemu-io')
    dev, backing = loop_device
    agent = make_agent().start()
    uri = agent.attach('v', dev, cache_size=8 * MiB,
                       write_policy='write_through')['export_uri']
    h = om.connect(uri)
    om.read_all(h, 8 * MiB)
    om.close(h)
    run(['qemu-io', '-f', 'raw', '-c', 'write -z -u 1M 6M',
         '-c', 'write -z 8M 4M', '-c', 'flush',
         '-c', 'read -P 0 1M 6M', '-c', 'read -P 0 8M 4M', uri])
    agent.detach('v')
    with open(backing, 'rb') as f:
        content = f.read()
    assert content[MiB:7 * MiB] == bytes(6 * MiB)
    assert content[8 * MiB:12 * MiB] == bytes(4 * MiB)
    assert content[:MiB] != bytes(MiB)
    # The 6 MiB the client let go are gone from the loop device's file.
    assert allocated(backing) <= 11 * MiB, allocated(backing)


@pytest.mark.parametrize('strategy', ['none', 'hybrid'])
def test_migrate_a_dirty_partial_last_block(make_agent, workdir, strategy):
    """A dirty partial last block migrates without growing the origin.

    The partial last block is cached like any other: dirty on the source,
    it is written back (none) or moves dirty to the destination (hybrid),
    which writes it back; neither writes past the origin's end (the file
    keeps its size) and every byte reads as written.
    """
    from fcache_testkit import migration_util as mu
    size = 4 * MiB + 1536
    path = os.path.join(workdir, 'odd.img')
    content = bytearray(os.urandom(size))
    with open(path, 'wb') as f:
        f.write(content)
    src, dst = mu.agent_pair(make_agent, cache_size='8M',
                             src_extra={'writeback_interval_ms': 3600000,
                                        'dirty_high_percent': 100})
    uri = src.attach('vol1', path, cache_size=2 * MiB,
                     write_policy='write_back')['export_uri']
    h = om.connect(uri)
    assert h.pread(1536, size - 1536) == content[-1536:]   # cached, clean
    tail = os.urandom(1024)
    h.pwrite(tail, size - 1024)                 # dirty, in the cache
    content[-1024:] = tail
    whole = os.urandom(4096)
    h.pwrite(whole, MiB)
    content[MiB:MiB + 4096] = whole
    om.close(h)
    assert src.show('vol1')['dirty_blocks'] == 2
    with open(path, 'rb') as f:
        assert f.read()[-1024:] != tail
    res = mu.fcache_json(['migrate', 'vol1', '--from', src.control_socket,
                          '--to', dst.control_socket, '--strategy', strategy,
                          '--rate-limit', '50', '--wait'])
    assert res['state'] == 'completed', res
    st = dst.show('vol1')
    h = om.connect(st['export_uri'])
    assert h.pread(size, 0) == content
    om.close(h)
    dst.detach('vol1')
    assert os.path.getsize(path) == size
    with open(path, 'rb') as f:
        assert f.read() == content
