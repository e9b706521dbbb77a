# SPDX-License-Identifier: Apache-2.0
"""Two volumes on one agent: a cache block of one is never served to the other.

Both volumes share the agent's cache device, at the same offsets, with
small quotas so that blocks are evicted and reused across volumes.  Every
4 KiB block written carries a stamp naming its volume and offset, so a
block served to the wrong volume is recognisable in the failure message.
"""

import threading

import pytest

from fcache_testkit import oracle as om

MiB = 1 << 20
BS = 4096
SIZE = 8 * MiB


def stamped(volume, off, gen):
    head = ('%s off=%012d gen=%04d|' % (volume, off, gen)).encode()
    return head + bytes((off // BS + gen + i) & 0xff
                        for i in range(BS - len(head)))


def fill(h, orc, volume, gen, step=64 * 1024):
    for off in range(0, SIZE, step):
        data = b''.join(stamped(volume, o, gen)
                        for o in range(off, off + step, BS))
        h.pwrite(data, off)
        orc.write(off, data)


def check_volume(h, orc, volume, other):
    data = om.read_all(h, SIZE)
    bad = om.compare(orc, data, 'read of %s' % volume)
    if bad:
        foreign = [o for o in range(0, SIZE, BS)
                   if data[o:o + len(other)] == other.encode()]
        raise AssertionError('%s: %d blocks hold the other volume\'s data; '
                             '%r' % (volume, len(foreign), bad))


@pytest.mark.timeout(180)
@pytest.mark.parametrize('restart', ['sigterm', 'kill9'])
def test_two_volumes_isolated(make_agent, make_origin, restart):
    agent = make_agent(cache_size='3M', writeback_interval_ms=100).start()
    # Two origins of the same size, one over NBD and one a file.
    oa = make_origin(SIZE, seed=1)
    ob = make_origin(SIZE, nbd=False, seed=2)
    ua = agent.attach('vol-a', oa.uri, cache_size=MiB,
                      write_policy='write_back')['export_uri']
    ub = agent.attach('vol-b', ob.uri, cache_size=MiB,
                      write_policy='write_through')['export_uri']
    st = agent.status()
    assert st['used_bytes'] <= st['capacity_bytes']
    assert sorted(v['volume_id'] for v in st['volumes']) == ['vol-a', 'vol-b']
    ha, hb = om.connect(ua), om.connect(ub)
    ra, rb = om.Oracle(oa.content), om.Oracle(ob.content)

    # Same offsets, different data; 8 MiB each through 1 MiB caches.
    fill(ha, ra, 'vol-a', 1)
    fill(hb, rb, 'vol-b', 1)
    check_volume(ha, ra, 'vol-a', 'vol-b')
    check_volume(hb, rb, 'vol-b', 'vol-a')

    # Eviction pressure from both volumes at once.
    wa = om.Workload(ha, ra, seed=7, hot_start=0)
    wb = om.Workload(hb, rb, seed=8, hot_start=0)
    t = threading.Thread(target=wb.run, kwargs=dict(nops=2500))
    t.start()
    wa.run(nops=2500)
    t.join(120)
    assert not t.is_alive()
    wa.assert_clean()
    wb.assert_clean()
    check_volume(ha, ra, 'vol-a', 'vol-b')
    check_volume(hb, rb, 'vol-b', 'vol-a')
    for vid in ('vol-a', 'vol-b'):
        s = agent.show(vid)
        assert s['evictions'] > 0 and s['read_hits'] > 0, s
        assert s['cached_blocks'] <= MiB // BS, s
    # Now re-stamp the hot zones so that both caches hold the same
    # offsets with different content.
    for off in range(0, MiB, BS):
        for h, orc, vid in ((ha, ra, 'vol-a'), (hb, rb, 'vol-b')):
            d = stamped(vid, off, 2)
            h.pwrite(d, off)
            orc.write(off, d)
    om.close(ha)
    om.close(hb)

    if restart == 'sigterm':
        agent.stop()
    else:
        agent.kill()
    agent.start()
    ha, hb = om.connect(ua), om.connect(ub)
    check_volume(ha, ra, 'vol-a', 'vol-b')
    check_volume(hb, rb, 'vol-b', 'vol-a')
    om.close(ha)
    om.close(hb)

    # Detach one: the other is unaffected and the freed space is reusable.
    agent.detach('vol-a')
    assert om.compare(ra, oa.read_file(), 'vol-a origin file') == []
    hb = om.connect(ub)
    check_volume(hb, rb, 'vol-b', 'vol-a')
    om.close(hb)
    oc = make_origin(SIZE, seed=3)
    uc = agent.attach('vol-c', oc.uri, cache_size=2 * MiB,
                      write_policy='write_back')['export_uri']
    hc = om.connect(uc)
    rc = om.Oracle(oc.content)
    check_volume(hc, rc, 'vol-c', 'vol-b')
    fill(hc, rc, 'vol-c', 1)
    check_volume(hc, rc, 'vol-c', 'vol-b')
    om.close(hc)
    hb = om.connect(ub)
    check_volume(hb, rb, 'vol-b', 'vol-c')
    om.close(hb)
