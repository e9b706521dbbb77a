# SPDX-License-Identifier: Apache-2.0
"""Batched installs racing the VM's writes to the same blocks.

The destination installs the background copy a frame at a time (up to 255
blocks of 4 KiB; doc/reference/migration.rst, "Transfer protocol"): it writes a
frame's data to cache blocks nobody can see yet, and only then, under the
blocks' stripes, discards the copies of blocks the VM wrote meanwhile (or
already holds) and maps the rest.  Here the VM, moved to the destination,
rewrites the very blocks the copy is sending -- uniformly over the cached
region, aligned and unaligned, writes, zeroes and trims -- for as long as
the copy runs, with full-size batches (the rate limit allows a whole
frame per period).  Afterwards every block of the volume is read back on
its own and checked against the oracle: a stale copy installed over one
of the VM's writes would read back the source's older data.
"""

import time

import pytest

from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

BS = mu.BS
MiB = mu.MiB
SIZE = 32 * MiB
CACHE = 16 * MiB            # 4096 blocks: 16 full frames
# Cached on the source, rewritten at the destination.
REGION = (0, CACHE)
RATE_MBPS = 12              # 1.2 MB per 100 ms period: whole frames, ~1.4 s


def fill_source(src, orc, uri, policy, seed):
    """REGION cached on the source; write_back: many blocks of it dirty."""
    if policy == 'write_back':
        vm = mu.Vm(uri, orc, seed=seed, name='writer', region=REGION,
                   hot_share=0.0, mix=(('write', 1),))
        vm.run_for(1.0)
        vm.wl.assert_clean()
        vm.close()
    h = om.connect(uri, name='fill')
    data, errors = om.read_range(h, REGION[0], REGION[1])
    om.close(h)
    assert not errors and not mu.check_range(orc, REGION[0], data, 'fill')
    st = src.show('vol1')
    assert st['cached_blocks'] * BS == CACHE, st
    if policy == 'write_back':
        assert st['dirty_blocks'] > 100, st
    return st


@pytest.mark.timeout(180)
@pytest.mark.parametrize('strategy,policy', [
    ('firepan_if', 'read_only'), ('firepan_if', 'write_through'),
    ('cloudcache', 'write_back'), ('hybrid', 'write_back'),
    ('hybrid', 'read_only')])
def test_batched_installs_race_vm_writes(make_agent, make_origin, strategy,
                                         policy):
    extra = mu.source_config(policy)
    if policy == 'write_back':
        # Keep the dirty blocks for the copy to move.
        extra = {'writeback_interval_ms': 60000, 'dirty_high_percent': 95}
    src, dst = mu.agent_pair(make_agent, src_extra=extra)
    origin = make_origin(SIZE, seed=11)
    res = src.attach('vol1', origin.uri, cache_size=CACHE, write_policy=policy)
    orc = om.Oracle(origin.content)
    before = fill_source(src, orc, res['export_uri'], policy, seed=12)

    s, d = src.client(), dst.client()
    p = migration.prepare(s, d, 'vol1', strategy, rate_limit_mbps=RATE_MBPS)
    mid = p['migration_id']
    migration.start(s, d, mid)
    # The VM arrives and works on the blocks being copied, uniformly.
    vm = mu.Vm(p['export_uri'], orc, seed=13, name='vm', region=REGION,
               hot_share=0.0, depth=32)
    vm.resume()
    migration.switchover(s, d, mid)
    harness.wait_for(lambda: mu.status(dst, mid)['state'] in
                     ('completed', 'failed'), 60, 'the copy to end')
    time.sleep(0.3)
    vm.pause()
    vm.wl.assert_clean()
    st = mu.status(dst, mid)
    assert st['state'] == 'completed', st
    done = migration.finish(s, d, mid, timeout_s=60)
    assert done['state'] == 'completed', done
    writes = sum(vm.wl.counts[k] for k in ('write', 'zero', 'trim'))
    print('%s/%s: %d source blocks (%d dirty), VM %d writes/zeroes/trims '
          'during the copy; installed %d, discarded %d, fetched %d' % (
              strategy, policy, before['cached_blocks'],
              before['dirty_blocks'], writes, st['installed_copies'],
              st['discarded_copies'], st['fetched_blocks']))
    # The race happened: copies arrived for blocks the VM had rewritten,
    # and others were installed around them, batch by batch.  (firepan_if's
    # VM runs against the origin at once and rewrites most of the region
    # before its copy arrives: most copies are discarded there.)
    assert writes > 200, vm.wl.counts
    assert st['discarded_copies'] > 0, st
    assert st['installed_copies'] > 100, st

    # Every block, on its own, against the oracle.
    h = om.connect(p['export_uri'], name='scan')
    try:
        mism, errs, bad = mu.scan_blocks(h, SIZE, orc)
    finally:
        om.close(h)
    assert not errs, (errs, bad[:10])
    assert not mism, mism[:5]
    vm.close()
