# SPDX-License-Identifier: Apache-2.0
"""Block status (base:allocation) and NBD_CMD_CACHE on the agent's export.

QEMU's block layer copies efficiently only over an export that reports its
holes: a mirror, ``qemu-img convert`` and ``qemu-img map`` ask
NBD_CMD_BLOCK_STATUS and skip what is a hole.  The reference is nbdkit
serving the very image the agent caches: ``qemu-img map`` and ``nbdinfo
--map`` over both must tell data from holes alike, block by block (the
agent answers per cache block; the origin's data is in 1 MiB chunks, so
both agree exactly).  A block the VM wrote into a hole, dirty in the cache
and not yet at the origin, must be data; a prefetch (``h.cache()``) fills
the cache.
"""

import json
import os
import subprocess

import nbd
import pytest

from fcache_testkit import oracle as om

from .conftest import _require

MiB = 1 << 20
BS = 4096
SIZE = 64 * MiB


def run(cmd, timeout=60):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (cmd, p.stdout, p.stderr)
    return p.stdout


def qemu_map(uri):
    """``qemu-img map``'s extents: (start, length, data, zero)."""
    out = json.loads(run(['qemu-img', 'map', '-f', 'raw', '--output=json',
                          uri]))
    return [(e['start'], e['length'], e['data'], e['zero']) for e in out]


def nbdinfo_map(uri):
    """``nbdinfo --map``'s extents: (start, length, hole, zero)."""
    ext = []
    for line in run(['nbdinfo', '--map', uri]).splitlines():
        start, length, flags = (int(x) for x in line.split()[:3])
        ext.append((start, length, bool(flags & 1), bool(flags & 2)))
    return ext


def per_block(extents, size, is_data):
    """One letter per BS block: 'd' if any byte of it is data, else 'h'."""
    blocks = bytearray(b'h' * (size // BS))
    covered = 0
    for e in extents:
        start, length = e[0], e[1]
        assert start == covered, ('gap or overlap', start, covered)
        covered += length
        if is_data(e):
            for b in range(start // BS, (start + length + BS - 1) // BS):
                blocks[b] = ord('d')
    assert covered == size, (covered, size)
    return bytes(blocks)


def qemu_blocks(uri, size):
    return per_block(qemu_map(uri), size, lambda e: e[2] or not e[3])


def nbdinfo_blocks(uri, size):
    return per_block(nbdinfo_map(uri), size, lambda e: not e[2])


def block_status(h, count, offset, flags=0):
    """base:allocation's (length, flags) pairs from one request."""
    got = []

    def cb(metacontext, off, entries, err):
        assert metacontext == 'base:allocation'
        assert off == offset
        got.extend(zip(entries[0::2], entries[1::2]))
        return 0
    h.block_status(count, offset, cb, flags)
    return got


def connect_meta(uri):
    h = nbd.NBD()
    h.add_meta_context('base:allocation')
    h.connect_uri(uri)
    assert h.can_meta_context('base:allocation')
    return h


def holes_of(content, chunk=MiB):
    """Offsets of the all-zero 1 MiB chunks of the origin (its holes)."""
    zero = bytes(chunk)
    return [off for off in range(0, len(content), chunk)
            if content[off:off + chunk] == zero]


@pytest.fixture
def setup(make_agent, make_origin):
    _require('qemu-img', 'nbdinfo')
    # Write-back with a long interval: what the VM writes stays dirty in
    # the cache, not at the origin, for the length of the test.
    agent = make_agent(writeback_interval_ms=600000).start()
    origin = make_origin(SIZE, filled_fraction=0.3)
    return agent, origin


@pytest.mark.parametrize('kind', ['nbd', 'path'])
def test_map_matches_nbdkit(setup, kind):
    agent, origin = setup
    src = origin.server.uri if kind == 'nbd' else origin.path
    uri = agent.attach('v', src, cache_size=16 * MiB,
                       write_policy='write_back')['export_uri']
    ref = qemu_blocks(origin.server.uri, SIZE)
    assert b'h' in ref and b'd' in ref        # the image is sparse
    assert qemu_blocks(uri, SIZE) == ref
    assert nbdinfo_blocks(uri, SIZE) == nbdinfo_blocks(origin.server.uri,
                                                       SIZE) == ref
    # The same after the cache holds some of it, clean.
    h = om.connect(uri)
    om.read_all(h, SIZE)
    om.close(h)
    assert agent.show('v')['cached_blocks'] > 0
    assert qemu_blocks(uri, SIZE) == ref


def test_dirty_write_into_a_hole_is_data(setup):
    agent, origin = setup
    uri = agent.attach('v', origin.server.uri, cache_size=16 * MiB,
                       write_policy='write_back')['export_uri']
    oracle = om.Oracle(origin.content)
    hole = holes_of(origin.content)[1]
    off = hole + 8 * BS
    h = connect_meta(uri)
    assert block_status(h, BS, off) == [(BS, 3)]
    data = os.urandom(2 * BS)
    h.pwrite(data, off)
    oracle.write(off, data)
    # Dirty in the cache; the origin still has its hole there.
    assert agent.show('v')['dirty_blocks'] >= 2
    with open(origin.path, 'rb') as f:
        assert os.lseek(f.fileno(), hole, os.SEEK_DATA) > off + 2 * BS
    # Each request answers from its offset: the written blocks are data,
    # the rest of the hole around them is still a hole.
    assert block_status(h, MiB - 8 * BS, off) == [
        (2 * BS, 0), (MiB - 10 * BS, 3)]
    assert block_status(h, 8 * BS, hole)[0] == (8 * BS, 3)
    # REQ_ONE: one descriptor, never longer than asked.
    one = block_status(h, SIZE - hole, hole, nbd.CMD_FLAG_REQ_ONE)
    assert one == [(8 * BS, 3)]
    ref = bytearray(qemu_blocks(origin.server.uri, SIZE))
    for b in range(off // BS, off // BS + 2):
        ref[b] = ord('d')
    assert qemu_blocks(uri, SIZE) == bytes(ref)
    assert nbdinfo_blocks(uri, SIZE) == bytes(ref)
    assert not om.verify_all(h, oracle)
    om.close(h)


def test_cache_command_prefetches(setup):
    agent, origin = setup
    uri = agent.attach('v', origin.server.uri, cache_size=16 * MiB,
                       write_policy='write_through')['export_uri']
    h = om.connect(uri)
    assert h.can_cache()
    before = agent.show('v')
    h.cache(MiB, 4 * MiB)
    after = agent.show('v')
    assert after['cached_blocks'] - before['cached_blocks'] == MiB // BS
    assert after['promotions'] - before['promotions'] == MiB // BS
    # Then read: all hits, and the data is the origin's.
    got = h.pread(MiB, 4 * MiB)
    assert got == bytes(origin.content[4 * MiB:5 * MiB])
    assert agent.show('v')['read_hits'] - after['read_hits'] == MiB // BS
    om.close(h)


def test_convert_skips_holes(setup, workdir):
    agent, origin = setup
    uri = agent.attach('v', origin.server.uri, cache_size=16 * MiB,
                       write_policy='write_back')['export_uri']
    oracle = om.Oracle(origin.content)
    h = om.connect(uri)
    # Some dirty data in a hole, so the copy needs the cache's answer too.
    hole = holes_of(origin.content)[2]
    data = os.urandom(64 * 1024)
    h.pwrite(data, hole)
    oracle.write(hole, data)
    om.close(h)
    out = os.path.join(workdir, 'copy.img')
    before = agent.show('v')['read_bytes']
    run(['qemu-img', 'convert', '-f', 'raw', '-O', 'raw', uri, out],
        timeout=120)
    read = agent.show('v')['read_bytes'] - before
    with open(out, 'rb') as f:
        copy = f.read()
    assert oracle.check(0, copy) is None
    data_bytes = SIZE - len(holes_of(origin.content)) * MiB + 64 * 1024
    allocated = os.stat(out).st_blocks * 512
    # Sparse: about the data, not the whole volume.
    assert allocated <= data_bytes + 4 * MiB, (allocated, data_bytes)
    assert allocated < SIZE // 2
    # Skipped, not read and found zero: only the data crossed the export.
    assert read <= data_bytes + 4 * MiB, (read, data_bytes)
