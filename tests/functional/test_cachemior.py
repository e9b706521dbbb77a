# SPDX-License-Identifier: Apache-2.0
"""Cachemior's cache warmer as the FirepanIF paper describes it.

§3.1: the destination's warmer iterates the source's hot list from the
head, hottest first, and skips a block the migrated VM already brought
into the cache; §4.2: it is "one asynchronous I/O thread" that "creates
up to 128 requests concurrently for the shared storage".

The shared storage here is nbdkit behind its delay filter (every read
takes 20 ms, and nbdkit serves many at once), so what a preload costs is
how many reads it keeps in flight: 2,048 blocks take about 2,048 / 128
round trips at the paper's depth and 2,048 / 4 at a depth of 4.  The
tests assert the agent's own count of reads in flight and the ratio of
the two durations, not a duration against the clock.
"""

import time

from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

BS = mu.BS
MiB = mu.MiB
SIZE = 32 * MiB
CACHE = 8 * MiB                  # the hot list: 2,048 blocks
BLOCKS = CACHE // BS
COLD = (0, 2 * MiB)              # the source's 512 least recently used
DELAY = 'rdelay=20ms'


def delayed_origin(make_origin):
    # nbdkit's default of 16 threads per connection would cap what the
    # agent's 2 origin connections can have served at once.
    return make_origin(SIZE, filters=['delay'], filter_args=[DELAY],
                       options=['--threads', '128'])


def warm_source(make_agent, origin):
    """A source whose 8 MiB cache holds [0, 8 MiB), COLD the coldest."""
    src = make_agent(name='src', cache_size='32M').start()
    res = src.attach('vol1', origin.uri, cache_size=CACHE,
                     write_policy='read_only')
    orc = om.Oracle(origin.content)
    h = om.connect(res['export_uri'], name='warm')
    for lo, hi in ((0, CACHE), (COLD[1], CACHE)):
        data, errors = om.read_range(h, lo, hi)
        assert not errors and not mu.check_range(orc, lo, data, 'warm')
    om.close(h)
    st = src.show('vol1')
    assert st['cached_blocks'] == BLOCKS, st
    return src, orc


def migrate_phased(src, dst, during_switch=None):
    """Every phase by hand; returns the destination's final status.

    ``during_switch(export_uri, migration_id)`` runs right after the
    switchover, while the warmer preloads.
    """
    s, d = src.client(), dst.client()
    p = migration.prepare(s, d, 'vol1', 'cachemior')
    mid = p['migration_id']
    migration.start(s, d, mid)
    migration.switchover(s, d, mid)
    if during_switch:
        during_switch(p['export_uri'], mid)
    harness.wait_for(lambda: migration.status(d, mid)['state'] in
                     ('completed', 'failed', 'aborted'), 120,
                     'the preload to end')
    st = migration.status(d, mid)
    assert st['state'] == 'completed', st
    migration.finish(s, d, mid)
    return st, p['export_uri']


def check_all(uri, orc, what):
    h = om.connect(uri, name='check')
    try:
        mism = om.verify_all(h, orc, what)
    finally:
        om.close(h)
    assert not mism, mism


def test_warmer_keeps_128_reads_in_flight(make_agent, make_origin):
    """The paper's depth preloads 2,048 blocks many times faster than 4."""
    origin = delayed_origin(make_origin)
    src, orc = warm_source(make_agent, origin)
    deep = make_agent(name='deep', cache_size='32M').start()
    shallow = make_agent(name='shallow', cache_size='32M',
                         migration_preload_depth=4).start()

    fast, uri = migrate_phased(src, deep)
    assert fast['blocks_done'] == BLOCKS, fast
    assert fast['bytes_done'] == CACHE, fast
    assert fast['preload_peak_in_flight'] == 128, fast
    assert deep.show('vol1')['cached_blocks'] == BLOCKS
    check_all(uri, orc, 'after the 128-deep preload')

    # The same hot list again, from the first destination, at depth 4.
    slow, uri = migrate_phased(deep, shallow)
    assert slow['blocks_done'] == BLOCKS, slow
    assert slow['bytes_done'] == CACHE, slow
    assert slow['preload_peak_in_flight'] == 4, slow
    check_all(uri, orc, 'after the 4-deep preload')
    ratio = slow['duration_s'] / fast['duration_s']
    print('preload of %d blocks at 20 ms a read: %.2f s with 128 in flight, '
          '%.2f s with 4 (x%.1f)' % (BLOCKS, fast['duration_s'],
                                     slow['duration_s'], ratio))
    # 32x fewer round trips; most of the rest is fixed cost.
    assert ratio >= 6, (fast, slow)


def test_warmer_skips_what_the_vm_read(make_agent, make_origin):
    """Blocks the VM brings in first are not read from the origin again.

    At depth 4 the warmer needs about 10 s for the list; the VM reads the
    list's coldest 512 blocks at once, long before the warmer reaches
    them.  The origin then serves each of the 2,048 blocks once.
    """
    origin = delayed_origin(make_origin)
    src, orc = warm_source(make_agent, origin)
    dst = make_agent(name='dst', cache_size='32M',
                     migration_preload_depth=4).start()
    vm_read = {}

    def vm_reads_cold(uri, mid):
        h = om.connect(uri, name='vm')
        t0 = time.monotonic()
        data, errors = om.read_range(h, COLD[0], COLD[1])
        vm_read['s'] = time.monotonic() - t0
        om.close(h)
        assert not errors
        assert not mu.check_range(orc, COLD[0], data, 'VM read at dst')
        vm_read['done'] = migration.status(dst.client(), mid)

    st, uri = migrate_phased(src, dst, during_switch=vm_reads_cold)
    # The warmer was still before the cold end when the VM had read it.
    assert vm_read['done']['blocks_done'] < BLOCKS - COLD[1] // BS, vm_read
    skipped = COLD[1] // BS
    assert st['blocks_done'] == BLOCKS, st
    assert st['bytes_done'] == CACHE - skipped * BS, st
    vol = dst.show('vol1')
    assert vol['cached_blocks'] == BLOCKS, vol
    # Each block crossed from the storage once: the VM's 512, the
    # warmer's 1,536.
    assert vol['origin_read_bytes'] == CACHE, vol
    check_all(uri, orc, 'after a preload the VM overtook')
