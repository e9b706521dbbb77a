# SPDX-License-Identifier: Apache-2.0
"""Restarts: clean (SIGTERM) keeps the cache warm, kill -9 loses nothing.

* Clean restart: the whole cache map is saved, so the same blocks are
  cached after the restart and re-reading hot data is served from the
  cache (read_hits grows, origin_read_bytes does not).
* kill -9 (while requests are in flight from the workload, and after
  acknowledged writes that were never flushed): after the restart every
  acknowledged write reads back; write_back's dirty blocks are recovered
  and, once the volume is detached, are in the origin file itself.
* A corrupt metadata record after a crash with dirty data: the agent
  refuses to start, says why, and changes nothing.
"""

import glob
import hashlib
import os
import random
import socket
import threading

import pytest

from fcache_testkit import harness
from fcache_testkit import oracle as om

from .conftest import attach_and_connect

MiB = 1 << 20
BS = 4096
VOLUME_SIZE = 16 * MiB
VOLUME_CACHE = 2 * MiB
POLICIES = ['read_only', 'write_through', 'write_back']
RECORD = 32
HEADER = 4096
MD_DIRTY = 2


def pread_checked(h, orc, length, offset):
    got = h.pread(length, offset)
    m = orc.check(offset, got)
    assert m is None, m
    return got


# ---------------------------------------------------------------------------
# Clean restart
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('policy', POLICIES)
def test_clean_restart_keeps_cache_warm(make_agent, make_origin, policy):
    agent = make_agent(cache_size='8M', writeback_interval_ms=200).start()
    origin = make_origin(VOLUME_SIZE)
    res, h = attach_and_connect(agent, 'vol1', origin,
                                cache_size=VOLUME_CACHE, write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=31)
    wl.run(nops=4000)
    wl.assert_clean()
    if policy == 'write_back':
        # A cache full of dirty blocks has no room for read misses; let
        # the writeback thread drain it, then dirty a few blocks again so
        # the restart has dirty blocks to keep.
        harness.wait_for(lambda: agent.show('vol1')['dirty_blocks'] == 0,
                         30, 'writeback to drain the cache')
        for i in range(16):
            off = wl.hot[0] + (64 + i) * BS
            data = os.urandom(BS)
            h.pwrite(data, off)
            orc.write(off, data)

    # A hot range that is certainly cached: read it twice; the second
    # read must already be all hits.
    hot_off, hot_len = wl.hot[0], 64 * BS
    pread_checked(h, orc, hot_len, hot_off)
    s1 = agent.show('vol1')
    pread_checked(h, orc, hot_len, hot_off)
    s2 = agent.show('vol1')
    assert s2['read_hits'] - s1['read_hits'] == 64, (s1, s2)
    assert s2['origin_read_bytes'] == s1['origin_read_bytes'], (s1, s2)
    before = agent.show('vol1')
    assert before['cached_blocks'] > 0
    om.close(h)

    agent.stop()
    assert 'cache map saved' in agent.run_log()
    agent.start()

    after = agent.show('vol1')
    assert after['state'] == 'attached', after
    assert after['export_uri'] == res['export_uri']
    assert after['write_policy'] == policy
    assert after['cached_blocks'] == before['cached_blocks'], (before, after)
    if policy != 'write_back':
        assert after['dirty_blocks'] == 0, after
    else:
        assert after['dirty_blocks'] <= before['dirty_blocks'], (before,
                                                                 after)

    h = om.connect(res['export_uri'])
    pread_checked(h, orc, hot_len, hot_off)
    s3 = agent.show('vol1')
    assert s3['read_hits'] - after['read_hits'] == 64, (after, s3)
    assert s3['origin_read_bytes'] == after['origin_read_bytes'], (after, s3)
    assert s3['read_misses'] == after['read_misses'], (after, s3)

    mism = om.verify_all(h, orc)
    assert not mism, mism
    # And the volume keeps working after the restart.
    wl2 = om.Workload(h, orc, seed=32)
    wl2.run(nops=1000)
    wl2.assert_clean()
    om.close(h)


# ---------------------------------------------------------------------------
# kill -9
# ---------------------------------------------------------------------------

def kill_agent_later(agent, workload, delay):
    def go():
        workload.disconnect_expected.set()
        agent.kill()
    t = threading.Timer(delay, go)
    t.daemon = True
    t.start()
    return t


def crash_config(policy, writeback):
    if policy != 'write_back':
        return dict(writeback_interval_ms=100)
    if writeback == 'slow':
        # Write back slowly (one batch a second, no watermark rush) so
        # that plenty of dirty blocks are in the cache at the crash, and
        # some were already written back.
        return dict(writeback_interval_ms=1000, dirty_high_percent=100)
    # Write back all the time, so the crash likely lands in a pass.
    return dict(writeback_interval_ms=10, dirty_high_percent=5)


@pytest.mark.parametrize('policy,writeback', [
    ('read_only', None), ('write_through', None), ('write_back', 'slow'),
    ('write_back', 'busy')])
def test_kill9_loses_no_acknowledged_write(make_agent, make_origin, policy,
                                           writeback):
    agent = make_agent(cache_size='8M',
                       **crash_config(policy, writeback)).start()
    # A slightly slow origin keeps requests in flight inside the agent.
    origin = make_origin(VOLUME_SIZE, filters=['delay'],
                         filter_args=['rdelay=1ms', 'wdelay=1ms'])
    res, h = attach_and_connect(agent, 'vol1', origin,
                                cache_size=VOLUME_CACHE, write_policy=policy)
    uri = res['export_uri']
    orc = om.Oracle(origin.content)

    # 1. Acknowledged, never flushed writes, then kill -9.
    wl = om.Workload(h, orc, seed=41)
    wl.run(nops=2000)
    wl.assert_clean()
    rng = random.Random(42)
    for _ in range(64):
        off = rng.randrange(0, VOLUME_SIZE // BS) * BS
        data = rng.randbytes(BS)
        h.pwrite(data, off)
        orc.write(off, data)
    st = agent.show('vol1')
    if policy == 'write_back':
        assert st['writebacks'] > 0, st
    if writeback == 'slow':
        assert st['dirty_blocks'] > 0, st
    agent.kill()
    del h

    if origin.server.revive_after_known_crash():
        print('origin nbdkit restarted after its known abort (harness.py)')
    agent.start()
    after = agent.show('vol1')
    print('before kill', st)
    print('after restart', after)
    assert after['state'] == 'attached', after
    if policy == 'write_back':
        # Dirty blocks are recovered (at most as many as at the last look:
        # the writeback thread may have cleaned some before the kill).
        assert after['dirty_blocks'] <= st['dirty_blocks'], (st, after)
        if writeback == 'slow':
            assert after['dirty_blocks'] > 0, (st, after)
    # No reboot since the kill: the clean blocks are kept too, warm
    # (doc/reference/ucache.rst, "Warm restart"), and none is stale
    # (verify_all).
    assert after['cached_blocks'] >= 0.9 * st['cached_blocks'], (st, after)
    assert 'no reboot since' in agent.run_log()
    h = om.connect(uri)
    mism = om.verify_all(h, orc)
    assert not mism, mism

    # 2. kill -9 from another thread while the workload has requests in
    # flight.
    wl2 = om.Workload(h, orc, seed=43, depth=24)
    killer = kill_agent_later(agent, wl2, 0.6)
    wl2.run(duration=20, timeout=60)
    killer.join(10)
    print(wl2.summary())
    assert wl2.dead, 'the connection outlived kill -9?'
    assert not wl2.errors, wl2.errors[:5]
    assert not wl2.mismatches, wl2.mismatches[:5]
    assert wl2.lost > 0, 'no request was in flight at the kill'
    assert wl2.counts['write'] > 50
    del h

    if origin.server.revive_after_known_crash():
        print('origin nbdkit restarted after its known abort (harness.py)')
    agent.start()
    h = om.connect(uri)
    st = agent.show('vol1')
    print('after second restart', st)
    if writeback == 'slow':
        assert st['dirty_blocks'] > 0, st
    mism = om.verify_all(h, orc)
    assert not mism, mism
    # Still a working cache.
    wl3 = om.Workload(h, orc, seed=44)
    wl3.run(nops=1000)
    wl3.assert_clean()
    om.close(h)

    # Detach writes everything back: the origin file itself (read without
    # the agent) now holds every acknowledged write.
    agent.detach('vol1')
    assert not os.path.exists(uri.split('socket=')[1])
    origin.server.stop()
    mism = om.compare(orc, origin.read_file(), 'origin file after detach')
    assert not mism, mism
    assert orc.known_fraction() > 0.5


@pytest.mark.parametrize('policy', ['write_through', 'write_back'])
def test_kill9_then_reboot_drops_clean_blocks(make_agent, make_origin,
                                              policy):
    """A crash followed by a reboot keeps only the flushed dirty blocks.

    Clean records are not synced: after a reboot they may name data that
    never reached the disk.  The workload ends with a flush, so every
    dirty block is vouched for and comes back.
    """
    agent = make_agent(cache_size='8M', writeback_interval_ms=1000,
                       dirty_high_percent=100).start()
    origin = make_origin(VOLUME_SIZE)
    res, h = attach_and_connect(agent, 'vol1', origin,
                                cache_size=VOLUME_CACHE, write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=45)
    wl.run(nops=1500)
    wl.assert_clean()
    h.flush()
    st = agent.show('vol1')
    assert st['cached_blocks'] > st['dirty_blocks'], st
    agent.kill()
    del h
    # What a reboot changes for the agent: the kernel's boot id.
    with open(os.path.join(agent.state_dir, 'cache.boot'), 'w') as f:
        f.write('00000000-0000-0000-0000-000000000000')
    agent.start()
    after = agent.show('vol1')
    assert after['cached_blocks'] == after['dirty_blocks'], after
    if policy == 'write_back':
        assert after['dirty_blocks'] > 0, (st, after)
    assert 'the machine rebooted' in agent.run_log()
    h = om.connect(res['export_uri'])
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)


MD_SYNCED = 4


def md_dirty_records(path):
    """{oblock: (cache block, flags)} of the dirty records in cache.meta."""
    with open(path, 'rb') as f:
        data = f.read()
    out = {}
    for i in range((len(data) - HEADER) // RECORD):
        rec = data[HEADER + i * RECORD:HEADER + (i + 1) * RECORD]
        flags = int.from_bytes(rec[16:20], 'little')
        if flags & MD_DIRTY:
            out[int.from_bytes(rec[0:8], 'little')] = (i, flags)
    return out


def test_power_cut_keeps_flushed_writes_and_serves_no_stale_block(
        make_agent, make_origin):
    """A power cut loses at most the writes after the last flush.

    The kernel may write a dirty record to disk before the data it names;
    after a power cut that block would hold whatever it held before.  So
    a flush vouches for the dirty records written since the last one
    (FC_MD_SYNCED, after the cache file is synced), and after a reboot
    the others are dropped.  The power cut is played by scribbling over
    the cache blocks of every record no flush vouched for (their data
    never reached the disk) and changing the boot id.
    """
    agent = make_agent(cache_size='8M', writeback_interval_ms=600000,
                       dirty_high_percent=100).start()
    origin = make_origin(VOLUME_SIZE)
    res, h = attach_and_connect(agent, 'vol1', origin,
                                cache_size=VOLUME_CACHE,
                                write_policy='write_back')
    first = [bytes([1 + i % 250]) * BS for i in range(64)]
    for i, data in enumerate(first):
        h.pwrite(data, i * BS)
    h.flush()
    later = [bytes([0xb0 + i % 64]) * BS for i in range(80)]
    for i, data in enumerate(later):
        h.pwrite(data, (64 + i) * BS)
    overwrites = {i: bytes([0xc0 + i]) * BS for i in range(16)}
    for i, data in overwrites.items():
        h.pwrite(data, i * BS)

    recs = md_dirty_records(os.path.join(agent.state_dir, 'cache.meta'))
    for i in range(64):
        assert recs[i][1] & MD_SYNCED, (i, recs[i])
    for i in range(64, 144):
        assert not recs[i][1] & MD_SYNCED, (i, recs[i])
    agent.kill()
    del h
    with open(os.path.join(agent.state_dir, 'cache.img'), 'r+b') as f:
        for ob, (cb, flags) in recs.items():
            if not flags & MD_SYNCED:
                f.seek(cb * BS)
                f.write(b'\xee' * BS)
    with open(os.path.join(agent.state_dir, 'cache.boot'), 'w') as f:
        f.write('00000000-0000-0000-0000-000000000000')
    agent.start()
    assert 'dropped 80 dirty cache blocks written after the last flush' in \
        agent.run_log()
    h = om.connect(res['export_uri'])
    for i in range(144):
        got = h.pread(BS, i * BS)
        if i < 16:
            # The flushed write, or the newer one of the same block.
            assert got in (first[i], overwrites[i]), i
        elif i < 64:
            assert got == first[i], i
        else:
            # Never flushed: lost, the origin's data is back.
            assert got == origin.content[i * BS:(i + 1) * BS], i
    om.close(h)
    agent.detach('vol1')
    data = origin.read_file()
    for i in range(16, 64):
        assert data[i * BS:(i + 1) * BS] == first[i], i


def test_kill9_warm_restart_serves_hits(make_agent, make_origin):
    """After kill -9 the restarted agent serves its cache warm.

    Re-reading what it cached costs the origin nothing.
    """
    agent = make_agent(cache_size='8M').start()
    origin = make_origin(VOLUME_SIZE)
    res, h = attach_and_connect(agent, 'vol1', origin,
                                cache_size=VOLUME_CACHE,
                                write_policy='write_through')
    orc = om.Oracle(origin.content)
    for i in range(256):
        pread_checked(h, orc, BS, i * BS)
    # Rewrite some of them: their records go and come back (metadata.h).
    for i in range(0, 256, 4):
        data = bytes([i % 251 + 1]) * BS
        h.pwrite(data, i * BS)
        orc.write(i * BS, data)
    before = agent.show('vol1')
    assert before['cached_blocks'] == 256, before
    agent.kill()
    del h
    agent.start()
    after = agent.show('vol1')
    assert after['cached_blocks'] == 256, after
    h = om.connect(res['export_uri'])
    for i in range(256):
        pread_checked(h, orc, BS, i * BS)
    again = agent.show('vol1')
    assert again['read_hits'] - after['read_hits'] == 256, (after, again)
    assert again['origin_read_bytes'] == after['origin_read_bytes']
    om.close(h)


# ---------------------------------------------------------------------------
# Corrupt metadata after a crash
# ---------------------------------------------------------------------------

def md_records(path):
    with open(path, 'rb') as f:
        data = f.read()
    out = []
    for i in range((len(data) - HEADER) // RECORD):
        rec = data[HEADER + i * RECORD:HEADER + (i + 1) * RECORD]
        if rec != bytes(RECORD):
            flags = int.from_bytes(rec[16:20], 'little')
            out.append((i, flags))
    return out


def listening(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def snapshot(paths):
    out = {}
    for p in paths:
        if os.path.isfile(p):
            with open(p, 'rb') as f:
                out[p] = hashlib.sha256(f.read()).hexdigest()
        else:
            out[p] = None
    return out


@pytest.mark.parametrize('where', ['dirty-record', 'header'])
def test_corrupt_metadata_refuses_to_start(make_agent, make_origin, where):
    agent = make_agent(cache_size='4M', writeback_interval_ms=3600000,
                       dirty_high_percent=100).start()
    origin = make_origin(4 * MiB, nbd=False)
    res, h = attach_and_connect(agent, 'vol1', origin, cache_size=1 * MiB,
                                write_policy='write_back')
    rng = random.Random(5)
    written = {}
    for i in range(32):
        off = (i * 7 % 256) * BS
        data = rng.randbytes(BS)
        h.pwrite(data, off)
        written[off] = data
    assert agent.show('vol1')['dirty_blocks'] == 32
    agent.kill()
    del h

    dirty = [i for i, flags in md_records(agent.meta_path)
             if flags & MD_DIRTY]
    assert len(dirty) == 32, dirty
    if where == 'header':
        pos = 12            # inside block_size/nr_blocks, covered by the crc
    else:
        pos = HEADER + dirty[len(dirty) // 2] * RECORD + 1   # in oblock
    with open(agent.meta_path, 'r+b') as f:
        f.seek(pos)
        old = f.read(1)
        f.seek(pos)
        f.write(bytes([old[0] ^ 0x40]))

    files = [agent.meta_path, agent.cache_path, origin.path] + \
        glob.glob(os.path.join(agent.state_dir, 'volumes', '*'))
    before = snapshot(files)
    listing = sorted(os.listdir(agent.state_dir))
    # (Not the cache image: posix_fallocate at start bumps its mtime, its
    # content is what matters.)
    mtimes = {p: os.stat(p).st_mtime_ns for p in files
              if p != agent.cache_path}

    rc, log = agent.start_expect_failure()
    print(log)
    assert rc != 0
    assert 'metadata' in log.lower(), log
    # Nothing was changed: not the metadata, the cache, the origin, the
    # volume state.
    assert snapshot(files) == before
    assert {p: os.stat(p).st_mtime_ns for p in mtimes} == mtimes
    assert sorted(os.listdir(agent.state_dir)) == listing
    # Nothing serves the volume (the socket file left by kill -9 may stay).
    assert not listening(os.path.join(agent.export_dir, 'vol1.sock'))
    assert not listening(agent.control_socket)

    # Repair the byte: the agent starts and every dirty block is there.
    with open(agent.meta_path, 'r+b') as f:
        f.seek(pos)
        f.write(old)
    agent.start()
    st = agent.show('vol1')
    assert st['dirty_blocks'] == 32, st
    h = om.connect(res['export_uri'])
    for off, data in written.items():
        assert h.pread(BS, off) == data, off
    om.close(h)
    agent.detach('vol1')
    with open(origin.path, 'rb') as f:
        image = f.read()
    for off, data in written.items():
        assert image[off:off + BS] == data, off


@pytest.mark.parametrize('how', ['sigterm', 'kill9'])
def test_restart_with_volume_that_has_no_cached_blocks(
        make_agent, make_origin, how):
    """A volume attached but never used must survive a restart.

    (Recovery then has no record for it: an empty list to give back.)
    """
    agent = make_agent(cache_size='4M').start()
    origin = make_origin(1 * MiB, nbd=False)
    res = agent.attach('idle', origin.uri, cache_size=1 * MiB,
                       write_policy='write_back')
    if how == 'sigterm':
        agent.stop()
    else:
        agent.kill()
    agent.start()
    st = agent.show('idle')
    assert st['state'] == 'attached' and st['cached_blocks'] == 0, st
    h = om.connect(res['export_uri'])
    assert h.pread(BS, 0) == bytes(origin.content[:BS])
    om.close(h)
