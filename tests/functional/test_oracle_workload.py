# SPDX-License-Identifier: Apache-2.0
"""Oracle-checked random workloads through the cache, for each write policy.

The cache of the volume (2 MiB) is much smaller than the data the workload
touches (a 24 MiB volume, 80 % of requests in a ~5 MiB hot zone), so the
run hits, misses and evicts; write_back also accumulates dirty blocks and
writes them back.  The statistics prove the cache was exercised, the
oracle that it returned the last acknowledged write every time.
"""

import os
import threading

import nbd
import pytest

from fcache_testkit import oracle as om

from .conftest import attach_and_connect

MiB = 1 << 20
BS = 4096
# Not a multiple of the 4 KiB cache block: the partial tail block is
# cached without reading or writing past the origin's end, and must read
# and write correctly.
VOLUME_SIZE = 24 * MiB + 2560
VOLUME_CACHE = 2 * MiB
POLICIES = ['read_only', 'write_through', 'write_back']


def check_exercised(st, sampler, policy):
    """Assert the statistics show hits, misses, evictions (and write-back)."""
    assert st['read_hits'] > 100, st
    assert st['read_misses'] > 100, st
    assert st['evictions'] > 100, st
    assert 0 < st['cached_blocks'] <= VOLUME_CACHE // BS, st
    assert st['origin_read_bytes'] > 0, st
    assert st['io_errors'] == 0, st
    if policy == 'read_only':
        assert st['invalidations'] > 0, st
    if policy == 'write_through':
        assert st['write_hits'] > 0 and st['origin_write_bytes'] > 0, st
    if policy == 'write_back':
        assert sampler.max.get('dirty_blocks', 0) > 0, sampler.max
        assert st['writebacks'] > 0, st
        assert st['cache_write_bytes'] > 0, st


@pytest.mark.parametrize('origin_kind', ['nbd', 'path'])
@pytest.mark.parametrize('policy', POLICIES)
def test_oracle_workload(make_agent, make_origin, policy, origin_kind):
    agent = make_agent(cache_size='8M', writeback_interval_ms=50).start()
    origin = make_origin(VOLUME_SIZE, nbd=origin_kind == 'nbd')
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=11)
    with om.StatsSampler(agent, 'vol1') as sampler:
        wl.run(nops=6000)
        wl.assert_clean()
        st = agent.show('vol1')
    print(wl.summary())
    print(st)
    check_exercised(st, sampler, policy)
    assert wl.counts['write'] > 1000 and wl.unaligned > 300
    # Everything, once more, including what the workload never read.
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)
    agent.assert_alive()


@pytest.mark.parametrize('policy', POLICIES)
def test_two_connections_one_volume(make_agent, make_origin, policy):
    """Two clients of one export, each on its half of the disk, at once.

    The export advertises multi-conn; the halves share cache blocks' LRU
    and quota, and neither client may see the other's data.
    """
    # The production default of 8 workers per connection, 32 in flight.
    agent = make_agent(cache_size='8M', writeback_interval_ms=50,
                       nbd_threads=8).start()
    origin = make_origin(VOLUME_SIZE)
    res, h1 = attach_and_connect(agent, 'vol1', origin,
                                 cache_size=VOLUME_CACHE, write_policy=policy)
    h2 = om.connect(res['export_uri'])
    orc = om.Oracle(origin.content)
    half = VOLUME_SIZE // 2 // BS * BS
    w1 = om.Workload(h1, orc, seed=21, region=(0, half), depth=32)
    w2 = om.Workload(h2, orc, seed=22, depth=32,
                     region=(half, VOLUME_SIZE // 512 * 512))
    # The halves never overlap, so sharing one oracle is safe; flushes on
    # either connection cover both (multi-conn).
    t = threading.Thread(target=w2.run, kwargs=dict(nops=2500))
    t.start()
    w1.run(nops=2500)
    t.join(120)
    assert not t.is_alive()
    w1.assert_clean()
    w2.assert_clean()
    mism = om.verify_all(h2, orc)
    assert not mism, mism
    st = agent.show('vol1')
    assert st['connections'] == 2, st
    assert st['read_hits'] > 0 and st['evictions'] > 0, st
    om.close(h1)
    om.close(h2)


@pytest.mark.parametrize('policy', POLICIES)
def test_oracle_workload_trim_zero_heavy(make_agent, make_origin, policy):
    """Many trims, write_zeroes and FUA writes, partial blocks included."""
    agent = make_agent(cache_size='8M', writeback_interval_ms=20).start()
    origin = make_origin(VOLUME_SIZE)
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=19, fua_share=0.3, unaligned_share=0.5,
                     mix=(('read', 35), ('write', 30), ('trim', 15),
                          ('zero', 15), ('flush', 5)))
    wl.run(nops=4000)
    print(wl.summary())
    wl.assert_clean()
    st = agent.show('vol1')
    assert st['trims'] > 300 and st['invalidations'] > 0, st
    # Trimmed ranges are unknown; everything else must still be right.
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)


@pytest.mark.parametrize('block_size', ['512', '64K'])
@pytest.mark.parametrize('policy', POLICIES)
def test_oracle_workload_block_sizes(make_agent, make_origin, policy,
                                     block_size):
    """Cache blocks smaller and larger than the 4 KiB requests."""
    agent = make_agent(cache_size='8M', block_size=block_size,
                       writeback_interval_ms=50).start()
    origin = make_origin(VOLUME_SIZE)
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=13, max_length=256 * 1024)
    with om.StatsSampler(agent, 'vol1') as sampler:
        wl.run(nops=3000)
    print(wl.summary())
    wl.assert_clean()
    st = agent.show('vol1')
    print(st)
    assert st['block_size'] == (512 if block_size == '512' else 65536)
    assert st['read_hits'] > 0 and st['evictions'] > 0, st
    if policy == 'write_back':
        assert sampler.max.get('dirty_blocks', 0) > 0 and \
            st['writebacks'] > 0, st
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)


@pytest.mark.parametrize('policy', POLICIES)
def test_oracle_workload_rws_admission(make_agent, make_origin, policy):
    """admission=rws: only reused blocks enter the cache (staging area)."""
    agent = make_agent(cache_size='8M', writeback_interval_ms=50).start()
    origin = make_origin(VOLUME_SIZE)
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy, admission='rws')
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=17)
    wl.run(nops=4000)
    print(wl.summary())
    wl.assert_clean()
    st = agent.show('vol1')
    print(st)
    assert st['admission'] == 'rws'
    assert st['read_hits'] > 0, st
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)


@pytest.mark.parametrize('policy', POLICIES)
def test_max_size_requests(make_agent, make_origin, policy):
    """Requests of max_block (32 MiB), unaligned, through a 2 MiB cache."""
    agent = make_agent(cache_size='8M', writeback_interval_ms=50).start()
    size = 40 * MiB
    origin = make_origin(size, nbd=False)
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy)
    assert h.get_block_size(nbd.SIZE_MAXIMUM) == 32 * MiB
    orc = om.Oracle(origin.content)
    big = os.urandom(32 * MiB)
    for off in (3 * BS + 512, 0, size - 32 * MiB):
        h.pwrite(big, off)
        orc.write(off, big)
        got = h.pread(32 * MiB, off)
        assert orc.check(off, got) is None
    h.zero(32 * MiB, 4 * MiB + 1024)
    orc.zero(4 * MiB + 1024, 32 * MiB)
    h.flush()
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)


@pytest.mark.timeout(180)
@pytest.mark.parametrize('policy', POLICIES)
def test_origin_errors(make_agent, make_origin, workdir, policy):
    """An origin failing 10 % of its requests: errors, never wrong data.

    Once the origin recovers everything reads back right, and detach
    writes every dirty block of a write_back volume back.
    """
    trigger = os.path.join(workdir, 'origin-errors-on')
    agent = make_agent(cache_size='8M', writeback_interval_ms=50).start()
    origin = make_origin(VOLUME_SIZE, filters=['error'],
                         filter_args=['error=EIO', 'error-rate=10%',
                                      'error-file=%s' % trigger])
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=policy)
    orc = om.Oracle(origin.content)
    om.Workload(h, orc, seed=71).run(nops=500)     # warm, no errors yet
    open(trigger, 'w').close()
    wl = om.Workload(h, orc, seed=72, tolerate_errors=True)
    wl.run(nops=3000)
    print(wl.summary())
    st = agent.show('vol1')
    print(st)
    assert wl.failed > 0, 'the error filter injected nothing?'
    assert not wl.mismatches, wl.mismatches[:5]
    agent.assert_alive()
    os.unlink(trigger)

    wl = om.Workload(h, orc, seed=73)
    wl.run(nops=1000)
    wl.assert_clean()
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)
    agent.detach('vol1')
    origin.server.stop()
    mism = om.compare(orc, origin.read_file(), 'origin file after detach')
    assert not mism, mism
