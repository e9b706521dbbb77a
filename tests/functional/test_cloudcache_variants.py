# SPDX-License-Identifier: Apache-2.0
"""CloudCache's migration (§5.2) and Figure 11's background variants.

The source's cache holds three sets when the VM moves: REUSED, read twice
(the reuse working set, RWS_1), ONCE, read once, and DIRTY, written once
on a write_back volume (write-back held off, so every one is dirty at the
switch).  After the switchover the VM runs at the destination on a region
of its own (the oracle workload: reads, writes, trims), concurrently with
the rate-limited background copy.  Per the source agent's
``cloudcache_variant``, the background copy sends:

* ``bg_rws`` (the paper's cloudcache): REUSED and DIRTY, not ONCE;
* ``bg_dirty``: DIRTY only;
* ``bg_ws``: all three (the whole cache, the paper's rejected baseline);
* ``on_demand``: nothing for a while, only what the VM fetches; then the
  DIRTY blocks it did not (test_cloudcache_on_demand).

Each variant: the bytes moved are exactly those blocks', the source's
cache shrinks as they move (a clean block is freed once sent, a dirty one
once acknowledged), and every byte read afterwards, through the
destination, is what the oracle says.
"""

import time

import pytest

from nova_ext import migration

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

BS = mu.BS
MiB = mu.MiB
REUSED = (4 * MiB, 5 * MiB)       # 256 blocks, read twice
ONCE = (5 * MiB, 7 * MiB)         # 512 blocks, read once
DIRTY = (8 * MiB, 8 * MiB + 512 * 1024)   # 128 blocks, written
WORK = mu.WORK                    # the VM's, at the destination


def blocks(r):
    return (r[1] - r[0]) // BS


CACHED = blocks(REUSED) + blocks(ONCE) + blocks(DIRTY)
EXPECTED = {
    'bg_rws': blocks(REUSED) + blocks(DIRTY),
    'bg_dirty': blocks(DIRTY),
    'bg_ws': blocks(REUSED) + blocks(ONCE) + blocks(DIRTY),
}


def three_sets(make_agent, make_origin, **src_extra):
    """Two agents; vol1 on the first, its cache holding the three sets.

    Returns (src, dst, oracle).
    """
    # No write-back on the source: DIRTY stays dirty until it moves.
    src_extra.update(writeback_interval_ms=3600000, dirty_high_percent=100)
    src, dst = mu.agent_pair(make_agent, src_extra=src_extra)
    origin = make_origin(mu.VOLUME_SIZE, seed=7)
    res = src.attach('vol1', origin.uri, cache_size=mu.VOLUME_CACHE,
                     write_policy='write_back')
    orc = om.Oracle(origin.content)
    h = om.connect(res['export_uri'], name='sets')
    for lo, hi in (REUSED, ONCE, REUSED):
        data, errors = om.read_range(h, lo, hi)
        assert not errors and not mu.check_range(orc, lo, data, 'warm')
    payload = bytes((i * 7 + 3) & 0xff for i in range(DIRTY[1] - DIRTY[0]))
    h.pwrite(payload, DIRTY[0])
    orc.write(DIRTY[0], payload)
    om.close(h)
    before = src.show('vol1')
    assert before['cached_blocks'] == CACHED, before
    assert before['dirty_blocks'] == blocks(DIRTY), before
    return src, dst, orc


@pytest.mark.parametrize('variant', ('bg_rws', 'bg_dirty', 'bg_ws'))
def test_cloudcache_variant(make_agent, make_origin, variant):
    src, dst, orc = three_sets(make_agent, make_origin,
                               cloudcache_variant=variant)

    s, d = src.client(), dst.client()
    # 1 MB/s: the copy takes about a second per 1,000 blocks, long enough
    # to watch the source shrink.
    p = migration.prepare(s, d, 'vol1', 'cloudcache', rate_limit_mbps=1)
    mid = p['migration_id']
    migration.start(s, d, mid)
    migration.switchover(s, d, mid)
    vm = mu.Vm(p['export_uri'], orc, seed=11, region=WORK, hot_share=0.0)
    vm.resume()
    # (blocks sent, source blocks cached) while the copy runs; the status
    # first, so the cache can only have shrunk more by the time it is read.
    samples = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        st = mu.status(src, mid)
        if st['state'] != 'switched':
            break
        samples.append((st['blocks_done'], src.show('vol1')['cached_blocks']))
        time.sleep(0.05)
    src_st = mu.status(src, mid)
    print('%s: (blocks sent, source blocks cached): %s; at the end %s' % (
        variant, samples, src_st))
    summ = migration.finish(s, d, mid)
    vm.pause()
    vm.wl.assert_clean()
    assert summ['state'] == 'completed', summ

    sent = EXPECTED[variant]
    assert src_st['blocks_total'] == sent, src_st
    assert src_st['blocks_done'] == sent, src_st
    assert summ['bytes_transferred'] == sent * BS, summ
    # The VM works elsewhere: nothing was fetched on demand.
    assert summ['fetched_blocks'] == 0, summ

    # The source vacates each block as it moves: after k blocks sent, at
    # most the DIRTY ones among them (freed on their ACK) are still there.
    mid_copy = [(k, c) for k, c in samples if 0 < k < sent]
    for k, c in samples:
        assert c <= CACHED - max(0, k - blocks(DIRTY)), (variant, samples)
    if variant != 'bg_dirty':
        # The copy was watched while it ran (a clean block freed on send).
        assert mid_copy, samples
    assert mu.volume_gone(src, 'vol1')

    # Every byte through the destination, and the moved blocks are cached
    # there (the VM's own on top).
    after = dst.show('vol1')
    assert after['cached_blocks'] >= sent, after
    h = om.connect(p['export_uri'], name='check')
    mism = om.verify_all(h, orc, 'destination after %s' % variant)
    om.close(h)
    vm.close()
    assert not mism, mism


def test_cloudcache_on_demand(make_agent, make_origin):
    """Figure 11's "On-demand": only what the VM asks for moves, at first.

    For ``cloudcache_on_demand_s`` after the switch the source queues no
    background copy: the VM, reading half of DIRTY at the destination,
    fetches exactly those blocks from the source.  The destination
    acknowledges each fetched dirty block once durable, and the source
    frees it then, long before the migration completes.  Then the dirty
    blocks it did not read follow in the background (the migration can end
    only once every dirty block has moved); REUSED and ONCE never move.
    """
    hold_s = 8
    src, dst, orc = three_sets(make_agent, make_origin,
                               cloudcache_variant='on_demand',
                               cloudcache_on_demand_s=hold_s)

    s, d = src.client(), dst.client()
    p = migration.prepare(s, d, 'vol1', 'cloudcache')
    mid = p['migration_id']
    migration.start(s, d, mid)
    migration.switchover(s, d, mid)
    half = (DIRTY[0], DIRTY[0] + (DIRTY[1] - DIRTY[0]) // 2)
    h = om.connect(p['export_uri'], name='vm')
    data, errors = om.read_range(h, *half)
    assert not errors and not mu.check_range(orc, half[0], data, 'fetched')
    # The source's cache gives back exactly the fetched blocks, all dirty,
    # while the hold still keeps the migration from completing.
    want = (CACHED - blocks(half), blocks(DIRTY) - blocks(half))
    deadline = time.monotonic() + hold_s / 2
    while True:
        shown = src.show('vol1')
        got = (shown['cached_blocks'], shown['dirty_blocks'])
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert got == want, (got, want)
    # Read again through the destination: its own durable copies now.
    data, errors = om.read_range(h, *half)
    assert not errors and not mu.check_range(orc, half[0], data, 'acked')
    held = mu.status(src, mid)
    # Still within the on-demand period: nothing queued, the VM's reads
    # fetched (bytes_done counts the fetch replies).
    assert held['state'] == 'switched', held
    assert held['blocks_total'] == 0, held
    assert 0 < held['background_in_s'] <= hold_s, held
    assert held['bytes_done'] == blocks(half) * BS, held
    summ = migration.finish(s, d, mid)
    assert summ['state'] == 'completed', summ
    assert summ['fetched_blocks'] == blocks(half), summ
    # What was left of DIRTY followed once the period was over; nothing
    # clean moved.
    assert summ['bytes_transferred'] == blocks(DIRTY) * BS, summ
    assert summ['duration_s'] >= hold_s, summ
    assert mu.volume_gone(src, 'vol1')
    mism = om.verify_all(h, orc, 'destination after on_demand')
    om.close(h)
    assert not mism, mism
