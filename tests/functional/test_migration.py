# SPDX-License-Identifier: Apache-2.0
"""Live cache migration between two real agents, checked by an oracle.

Every strategy x write policy: a volume whose cache (8 MiB) is smaller
than its data (32 MiB, on nbdkit) is warmed by an oracle workload on the
source agent; a VM stand-in (the same workload, libnbd aio, many requests
in flight) keeps running there until ``start`` (``firepan``: paused before
it), moves to the destination export -- where its I/O is held until the
switchover -- and keeps reading and writing during the rate-limited
background copy, so writes land on blocks the source cached and has not
sent yet (the invalidation filter and the on-demand paths).  Every read,
before, during and after, is checked against the oracle.

Two regions of the disk have roles:

* ``HOT`` (2 MiB): the pre-migration hot working set.  Read twice on the
  source before the switch (the second pass gives the source's hit
  ratio); the VM does not touch it during the migration; read once on the
  destination after ``finish``: its hit ratio there says whether the cache
  moved.
* ``WORK`` (2 MiB): where the VM works during the migration.  Cached on the
  source at the switch, and older than HOT in the LRU, so the hottest-first
  copy sends it after HOT, while the VM is already writing it.
"""

import json
import re
import time

import pytest

from nova_ext import costmodel
from nova_ext import migration
from nova_ext import vocabulary

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

BS = mu.BS
MiB = mu.MiB
VOLUME_SIZE = mu.VOLUME_SIZE
VOLUME_CACHE = mu.VOLUME_CACHE
HOT = mu.HOT
WORK = mu.WORK
setup_source = mu.setup_source
warm_sets = mu.warm_sets
RATE_MBPS = 4
POLICIES = ('read_only', 'write_through', 'write_back')
STRATEGIES = vocabulary.STRATEGIES + ('auto',)


def migrate_with_vm(src, dst, orc, vm, src_uri, strategy, seen,
                    min_dest_run=1.0):
    """Drive every phase with the VM stand-in; fill ``seen``."""
    s, d = src.client(), dst.client()
    vm.resume()
    time.sleep(0.3)
    expected_auto = None
    if strategy == 'auto':
        expected_auto = costmodel.choose_strategy(
            src.show('vol1'), link_bps=RATE_MBPS * 1000 * 1000)[0]
    prepared = migration.prepare(s, d, 'vol1', strategy,
                                 rate_limit_mbps=RATE_MBPS)
    mid = prepared['migration_id']
    resolved = prepared['strategy']
    seen.update(mid=mid, strategy=resolved, prepared=prepared)
    if strategy == 'auto':
        assert resolved == expected_auto, (prepared, expected_auto)
    else:
        assert resolved == strategy, prepared
    dst_uri = prepared['export_uri']

    # The destination export exists before the switchover: writes wait
    # there, reads are answered at once with current data
    # (doc/reference/migration.rst, "Reads before the switchover").  Until the
    # source connects the origin answers if the policy keeps it current; a
    # write_back volume's read waits for the source to connect, which answers
    # it.  Nothing read so is cached.  HOT is outside the VM's working region:
    # stable here.
    write_back = src.show('vol1')['write_policy'] == 'write_back'
    probe_dst = om.connect(dst_uri, name='probe-dst')
    cached_before = dst.show('vol1')['cached_blocks']
    early_pending, early_finish = mu.gated(probe_dst, HOT[0], 64 * 1024)
    assert early_pending == write_back, (
        'a read before the source connected was %s' % (
            'held' if early_pending else 'answered'))
    same = bytes(orc.data[HOT[0]:HOT[0] + BS])     # rewrite what is there
    pending, gate_finish = mu.gated_write(probe_dst, HOT[0], same)
    assert pending, 'destination served a write before the switchover'

    probe_src = om.connect(src_uri, name='probe-src')
    if resolved != 'firepan':
        # The VM keeps running on the source while the agents connect.
        migration.start(s, d, mid)
        time.sleep(0.3)
        # Written on the source after the agents connected: a read at the
        # destination must see it (the source answers it).
        fresh = bytes([0x5e]) * BS
        probe_src.pwrite(fresh, HOT[0] + 64 * 1024)
        orc.write(HOT[0] + 64 * 1024, fresh)
    vm.pause()
    assert vm.wl.completions > 0
    seen['source_ratio'] = warm_sets(src, orc, src_uri)
    # (firepan_start and the acks of a copy make the source forget them.)
    seen['src_dirty_at_switch'] = src.show('vol1')['dirty_blocks']
    if resolved == 'firepan':
        t0 = time.monotonic()
        migration.start(s, d, mid)
        seen['firepan_start_s'] = time.monotonic() - t0
        # The copy is done and the source frozen: a write there would
        # diverge from what the destination got.
        assert mu.modify_errnos(probe_src, HOT[0]) == dict.fromkeys(
            ('write', 'zero', 'trim'), mu.EPERM)
    mu.wait_state(dst, mid, ('connected',), timeout=5)
    err, early = early_finish(timeout=10)
    assert err == 0, 'read before the switchover failed: errno %d' % err
    assert not orc.check(HOT[0], bytearray(early)), \
        'read before the switchover: wrong data'
    # Once the source is connected, reads go to it: current data at once.
    t0 = time.monotonic()
    now = probe_dst.pread(128 * 1024, HOT[0])
    seen['forwarded_read_s'] = time.monotonic() - t0
    assert not orc.check(HOT[0], bytearray(now)), \
        'read before the switchover, source connected: wrong data'
    assert mu.status(dst, mid)['forwarded_reads'] >= 1, mu.status(dst, mid)
    if resolved != 'firepan':    # (firepan's copy is in by now)
        assert dst.show('vol1')['cached_blocks'] == cached_before, \
            'a read before the switchover was cached'

    # The VM moves.  Before the switchover its writes wait at the
    # destination's gate; its reads are answered (by the source) and its
    # flushes too (nothing was written here yet).
    # (Held writes can take every worker of the connection, and then
    # reads queue behind them: the switchover does not wait for either.)
    vm.move(dst_uri)
    before = vm.wl.modify_completions
    vm.resume()
    time.sleep(0.3)
    assert vm.wl.modify_completions == before, \
        'the destination let a write through before the switchover'
    held = [r.kind for r in list(vm.wl.inflight.values())]
    assert set(held) & set(mu.MODIFY_KINDS), held

    t0 = time.monotonic()
    sw = migration.switchover(s, d, mid)
    seen['switchover_s'] = time.monotonic() - t0
    seen['switchover'] = sw
    seen['src_after_switch'] = src.show('vol1')
    seen['dst_after_switch'] = mu.status(dst, mid)
    seen['dst_vol_after_switch'] = dst.show('vol1')
    err = gate_finish()
    assert err == 0, 'gated write failed with errno %d' % err
    # The source must refuse writes from now on, whatever the strategy.
    assert mu.modify_errnos(probe_src, HOT[0]) == dict.fromkeys(
        ('write', 'zero', 'trim'), mu.EPERM)
    om.close(probe_src)
    om.close(probe_dst)

    # The background copy (rate-limited) runs while the VM works.
    if resolved == 'firepan_if':
        # Meanwhile the destination serves from the origin, not the cache.
        time.sleep(0.5)
        st = mu.status(dst, mid)
        vol = dst.show('vol1')
        assert st['state'] == 'switched', st
        was = seen['dst_vol_after_switch']
        assert vol['read_hits'] == was['read_hits'], (was, vol)
        assert vol['read_misses'] > was['read_misses'], (was, vol)
    t_switch = time.monotonic()
    seen['summary'] = migration.finish(s, d, mid, timeout_s=120)
    seen['finish_after_s'] = time.monotonic() - t_switch
    left = min_dest_run - (time.monotonic() - t_switch)
    if left > 0:
        time.sleep(left)
    seen['dst_status'] = mu.status(dst, mid)
    vm.pause()
    return seen


def roll_back(src, dst, seen):
    """After a failure: let requests held at the gate go (quietly)."""
    if 'mid' not in seen:
        return
    try:
        migration.abort(src.client(), dst.client(), seen['mid'])
    except Exception:
        pass


def check_after(src, dst, origin, orc, vm, seen):
    resolved = seen['strategy']
    summ = seen['summary']
    dst_st = seen['dst_status']
    vm.wl.assert_clean()
    assert summ['state'] == 'completed', summ
    assert summ['strategy'] == resolved, summ
    assert dst_st['state'] == 'completed', dst_st

    # The source forgot the volume and its cache space.
    assert mu.volume_gone(src, 'vol1'), 'source still has vol1 after finish'
    assert src.status()['used_bytes'] == 0, src.status()

    if resolved in ('firepan_if', 'cloudcache', 'hybrid'):
        # The VM wrote blocks the source had not sent yet: their copies
        # arrived late and were thrown away.
        assert dst_st['discarded_copies'] > 0, dst_st
    if resolved == 'hybrid':
        assert dst_st['fetched_blocks'] > 0, dst_st
    # What the destination learnt at the switch: hybrid every cached
    # block, cloudcache the dirty ones only.
    sw_st = seen['dst_after_switch']
    if resolved == 'hybrid':
        assert sw_st['remote_clean_blocks'] > 0, sw_st
    if resolved == 'cloudcache':
        assert sw_st['remote_clean_blocks'] == 0, sw_st
    if resolved == 'cachemior':
        assert summ['preloaded_blocks'] > 0, summ
        assert summ['origin_read_bytes'] > 0, summ
    if seen['policy'] == 'write_back':
        # Dirty blocks: flushed at the switch, or left to move.
        left = seen['src_after_switch']['dirty_blocks']
        if resolved in ('none', 'cachemior', 'firepan_if'):
            assert left == 0, seen['src_after_switch']
        elif resolved in ('cloudcache', 'hybrid'):
            assert left > 0, seen['src_after_switch']
    if resolved in mu.COPYING:
        assert summ['blocks_transferred'] > 0, summ
        assert summ['bytes_transferred'] >= \
            BS * summ['blocks_transferred'] // 2, summ
    elif resolved == 'none':
        assert summ['blocks_transferred'] == 0, summ
        assert summ['bytes_transferred'] == 0, summ

    # The pre-migration hot set, once, through the destination.
    h = om.connect(vm.uri, name='hot-pass')
    ratio = mu.hit_pass(dst, 'vol1', h, orc, HOT[0], HOT[1],
                        'destination HOT pass')
    om.close(h)
    src_ratio = seen['source_ratio']
    print('%s: source HOT hit ratio %.3f, destination %.3f; %s; %s' % (
        resolved, src_ratio, ratio, summ, vm.wl.summary()))
    assert src_ratio > 0.95, src_ratio
    if seen['policy'] == 'write_back':
        assert seen['src_dirty_at_switch'] > 0, seen
    if resolved in mu.WARM:
        assert ratio >= 0.9 * src_ratio, (
            '%s: destination hit ratio %.3f over the hot set < 0.9 x the '
            'source\'s %.3f; status %s' % (resolved, ratio, src_ratio, dst_st))
    else:
        assert ratio < 0.1, (resolved, ratio)

    # Everything, through the destination.
    mism = om.verify_all(vm.h, orc, 'destination verify')
    assert not mism, mism
    om.close(vm.h)
    # The origin holds every acknowledged write once the destination lets
    # go of the volume (write_back: dirty blocks written back).
    dst.detach('vol1')
    mism = om.compare(orc, origin.read_file(), 'origin after detach')
    assert not mism, mism
    src.assert_alive()
    dst.assert_alive()


@pytest.mark.timeout(90)
@pytest.mark.parametrize('policy', POLICIES)
@pytest.mark.parametrize('strategy', STRATEGIES)
def test_migrate_under_load(make_agent, make_origin, strategy, policy):
    src, dst, origin, orc, vm, uri = setup_source(make_agent, make_origin,
                                                  policy)
    seen = {'policy': policy}
    try:
        migrate_with_vm(src, dst, orc, vm, uri, strategy, seen)
    except BaseException:
        roll_back(src, dst, seen)
        raise
    finally:
        vm.pause()
    check_after(src, dst, origin, orc, vm, seen)


# ---------------------------------------------------------------------------
# Without a VM: the command line, progress, rate limit, abort, LRU order
# ---------------------------------------------------------------------------

SUMMARY_KEYS = ('strategy', 'state', 'blocks_transferred',
                'bytes_transferred', 'duration_s', 'downtime_s',
                'invalidated_blocks', 'origin_read_bytes')


warmed_volume = mu.warmed_volume


def test_cli_migrate_wait_json(make_agent, make_origin):
    src, dst, origin, orc, uri = warmed_volume(make_agent, make_origin)
    before = src.show('vol1')
    res = mu.fcache_json(['migrate', 'vol1', '--from', src.control_socket,
                          '--to', dst.control_socket, '--strategy', 'hybrid',
                          '--rate-limit', '50', '--wait'])
    for k in SUMMARY_KEYS:
        assert k in res, (k, res)
    assert res['strategy'] == 'hybrid' and res['state'] == 'completed', res
    assert res['blocks_transferred'] == before['cached_blocks'], (res, before)
    assert res['bytes_transferred'] == before['cached_blocks'] * BS, res
    assert res['duration_s'] > 0 and res['downtime_s'] >= 0, res
    assert res['invalidated_blocks'] == 0, res
    assert mu.volume_gone(src, 'vol1')
    st = dst.show('vol1')
    assert st['cached_blocks'] == before['cached_blocks'], st
    # Dirty blocks moved dirty (the destination writes them back).  The
    # source's own write-back goes on until the switchover, so fewer than
    # `before` may be left by then; the data checks below cover the rest.
    assert before['dirty_blocks'] > 0, before
    assert st['dirty_blocks'] + st['writebacks'] > 0, (st, before)
    # Served by the destination, every byte as the oracle says.
    h = om.connect(st['export_uri'])
    assert not om.verify_all(h, orc)
    om.close(h)
    dst.detach('vol1')
    assert not om.compare(orc, origin.read_file(), 'origin')


def test_cli_migrate_phase_by_phase(make_agent, make_origin):
    src, dst, origin, orc, uri = warmed_volume(make_agent, make_origin)
    common = ['vol1', '--from', src.control_socket, '--to',
              dst.control_socket]
    prep = mu.fcache_json(['migrate'] + common + [
        '--strategy', 'firepan_if', '--phase', 'prepare'])
    mid = prep['migration_id']
    assert prep['strategy'] == 'firepan_if', prep
    # The destination's export, under a name of its own.
    assert re.match(r'nbd\+unix:///[0-9a-f]{32}\?socket=/',
                    prep['export_uri']), prep
    assert prep['export_uri'].split('?')[0] != uri.split('?')[0]
    # The destination VM can open the export now; its writes wait.
    h = om.connect(prep['export_uri'])
    pending, finish_write = mu.gated_write(h, HOT[0],
                                           orc.data[HOT[0]:HOT[0] + BS])
    assert pending
    phase = common + ['--migration', mid, '--phase']
    st = mu.fcache_json(['migrate'] + phase + ['start'])
    assert st['state'] == 'connected' and st['role'] == 'source', st
    st = mu.fcache_json(['migrate'] + phase + ['switchover'])
    assert st['state'] in ('switched', 'completed'), st
    assert finish_write() == 0
    assert not orc.check(HOT[0], bytearray(h.pread(BS, HOT[0])))
    # --phase finish without --wait: the destination's progress.
    st = mu.fcache_json(['migrate'] + phase + ['finish'])
    assert st['role'] == 'destination' and st['migration_id'] == mid, st
    for k in ('blocks_done', 'blocks_total', 'rate_bytes_per_s', 'eta_s'):
        assert k in st, (k, st)
    res = mu.fcache_json(['migrate'] + phase + ['finish', '--wait'])
    for k in SUMMARY_KEYS:
        assert k in res, (k, res)
    assert res['state'] == 'completed' and res['strategy'] == 'firepan_if'
    assert res['blocks_transferred'] == VOLUME_CACHE // BS, res
    assert mu.volume_gone(src, 'vol1')
    ratio = mu.hit_pass(dst, 'vol1', h, orc, HOT[0], HOT[1], 'dest HOT')
    assert ratio > 0.9, ratio
    assert not om.verify_all(h, orc)
    om.close(h)
    # A phase of a migration that is over is refused with one line.
    rc, out, err = mu.fcache(['migrate'] + phase + ['switchover'])
    assert rc != 0 and out == '' and err.count('\n') == 1, (rc, out, err)
    assert 'fcache: error:' in err


def test_cli_phase_needs_migration_id(make_agent):
    src, dst = mu.agent_pair(make_agent)
    rc, out, err = mu.fcache(['migrate', 'vol1', '--from', src.control_socket,
                              '--to', dst.control_socket, '--phase', 'start'])
    assert rc == 2 or rc == 1, (rc, out, err)
    assert '--migration' in err and out == '', err


def test_progress_while_copying(make_agent, make_origin):
    src, dst, origin, orc, uri = warmed_volume(make_agent, make_origin,
                                               policy='read_only')
    s, d = src.client(), dst.client()
    p = migration.prepare(s, d, 'vol1', 'hybrid', rate_limit_mbps=2)
    mid = p['migration_id']
    migration.start(s, d, mid)
    migration.switchover(s, d, mid)
    samples = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        st = mu.status(src, mid)
        samples.append(st)
        if st['state'] != 'switched':
            break
        time.sleep(0.25)
    running = [x for x in samples if x['state'] == 'switched' and
               0 < x['blocks_done'] < x['blocks_total']]
    assert len(running) >= 3, samples
    mid_sample = running[len(running) // 2]
    assert mid_sample['blocks_total'] == VOLUME_CACHE // BS, mid_sample
    assert mid_sample['bytes_total'] == VOLUME_CACHE, mid_sample
    assert mid_sample['rate_bytes_per_s'] > 0, mid_sample
    assert mid_sample['eta_s'] > 0, mid_sample
    assert mid_sample['rate_limit_bytes_per_s'] == 2 * 1000 * 1000
    done = [x['blocks_done'] for x in running]
    assert done == sorted(done) and done[-1] > done[0], done
    # The destination reports its side too.
    dst_st = mu.status(dst, mid)
    for k in ('blocks_done', 'blocks_total', 'fetched_blocks',
              'discarded_copies', 'installed_copies', 'remote_clean_blocks',
              'remote_dirty_blocks'):
        assert k in dst_st, (k, dst_st)
    res = migration.finish(s, d, mid, timeout_s=60)
    assert res['state'] == 'completed', res


@pytest.mark.timeout(90)
def test_rate_limit_honoured(make_agent, make_origin):
    """A copy of ~4 s at 2 MB/s: the long-run rate is the limit (+15 %).

    CloudCache's background copy of the whole cache (variant bg_ws): its
    default sends only the blocks reused in the window, which the fill
    below reads once.
    """
    limit_mbps = 2
    src, dst, origin, orc, uri = warmed_volume(
        make_agent, make_origin, policy='read_only',
        src_extra={'cloudcache_variant': 'bg_ws'})
    s, d = src.client(), dst.client()
    p = migration.prepare(s, d, 'vol1', 'cloudcache',
                          rate_limit_mbps=limit_mbps)
    mid = p['migration_id']
    migration.start(s, d, mid)
    migration.switchover(s, d, mid)
    samples = []
    while True:
        st = mu.status(src, mid)
        samples.append((time.monotonic(), st['bytes_done'], st['state']))
        if st['state'] != 'switched':
            break
        assert len(samples) < 1000, samples[-3:]
        time.sleep(0.1)
    res = migration.finish(s, d, mid, timeout_s=60)
    assert res['state'] == 'completed', res
    copying = [x for x in samples if x[1] > 0]
    t0, b0, _ = copying[0]
    t1, b1, _ = copying[-1]
    assert t1 - t0 >= 3.0, (t1 - t0, samples[:3], samples[-3:])
    limit = limit_mbps * 1000 * 1000
    rate = (b1 - b0) / (t1 - t0)
    # Each 4 KiB block costs a 16-byte header and its 8-byte id too.
    wire = rate * (BS + 24) / BS
    print('rate %.0f B/s of payload (%.0f on the wire) for a limit of %d '
          'over %.1f s' % (rate, wire, limit, t1 - t0))
    assert wire <= 1.15 * limit, (wire, limit)
    assert wire >= 0.75 * limit, (wire, limit)
    # And the whole copy, end to end.
    assert res['bytes_transferred'] == VOLUME_CACHE, res


@pytest.mark.parametrize('when', ('prepared', 'started'))
@pytest.mark.parametrize('strategy,policy', [
    ('hybrid', 'write_back'), ('firepan', 'read_only'),
    ('firepan', 'write_back'), ('cachemior', 'write_through')])
def test_abort_before_switchover(make_agent, make_origin, strategy, policy,
                                 when):
    """The source keeps the VM and its cache; the destination forgets."""
    src, dst, origin, orc, uri = warmed_volume(make_agent, make_origin,
                                               policy=policy)
    before = src.show('vol1')
    if policy == 'write_back':
        assert before['dirty_blocks'] > 0, before
    s, d = src.client(), dst.client()
    probe = om.connect(uri, name='probe')
    p = migration.prepare(s, d, 'vol1', strategy, rate_limit_mbps=50)
    mid = p['migration_id']
    dh = om.connect(p['export_uri'], name='dst-probe')
    # A write waits at the destination's gate (a read before the source
    # connects would be answered from the origin: QEMU's probe).
    pending, finish_write = mu.gated_write(dh, HOT[0],
                                           orc.data[HOT[0]:HOT[0] + BS])
    assert pending
    if when == 'started':
        migration.start(s, d, mid)
        if strategy == 'firepan':
            assert mu.write_errno(probe, HOT[0]) == mu.EPERM
    if strategy == 'cachemior':
        rc, out, err = mu.fcache(['migrate', 'vol1', '--from',
                                  src.control_socket, '--to',
                                  dst.control_socket, '--migration', mid,
                                  '--phase', 'abort', '--json'])
        assert rc == 0, (rc, out, err)
        st = json.loads(out)
    else:
        st = migration.abort(s, d, mid)
    assert st['state'] == 'aborted', st
    # The destination's held request fails: its volume is gone.
    err = finish_write()
    assert err != 0
    om.close(dh)
    assert mu.volume_gone(dst, 'vol1'), dst.status()
    assert dst.status()['used_bytes'] == 0, dst.status()
    # The source is as it was: every byte, the cache, and writable.
    after = src.show('vol1')
    # (Write-back may have cleaned some dirty blocks meanwhile.)
    cleaned = after['writebacks'] - before['writebacks']
    if after['dirty_blocks'] + cleaned != before['dirty_blocks']:
        # Say what that means for the data before anything else.
        mism = mu.check_range(orc, 0, om.read_range(probe, 0, orc.size)[0],
                              'source read after abort')
        raise AssertionError(
            'abort of %s/%s after %s: the source had %d dirty blocks before '
            'the migration and %d after the abort, %d written back meanwhile '
            '(%d cached before, %d after): dirty blocks the destination '
            'acknowledged were '
            'forgotten by the source, then dropped by the destination\'s '
            'abort; reads now return: %s' % (
                strategy, policy, when, before['dirty_blocks'],
                after['dirty_blocks'], cleaned, before['cached_blocks'],
                after['cached_blocks'], mism[:3] or 'the right data'))
    assert after['cached_blocks'] == before['cached_blocks'], (before, after)
    ratio = mu.hit_pass(src, 'vol1', probe, orc, HOT[0], HOT[1],
                        'source HOT after abort')
    assert ratio > 0.95, ratio
    mism = om.verify_all(probe, orc, 'source after abort')
    assert not mism, mism
    payload = bytes(range(256)) * (BS // 256)
    assert mu.write_errno(probe, HOT[0], payload=payload) == 0
    orc.write(HOT[0], payload)
    wl = om.Workload(probe, orc, seed=5)
    wl.run(nops=500)
    wl.assert_clean()
    om.close(probe)
    src.detach('vol1')
    mism = om.compare(orc, origin.read_file(), 'origin after detach')
    assert not mism, mism
    # And the volume can migrate again afterwards (the ids are new).
    src.attach('vol1', origin.uri, cache_size=VOLUME_CACHE,
               write_policy=policy)
    res = migration.migrate(s, d, 'vol1', 'hybrid')
    assert res['state'] == 'completed', res


@pytest.mark.parametrize('strategy', ('firepan', 'firepan_if', 'cloudcache',
                                      'hybrid', 'cachemior'))
def test_copy_keeps_hot_blocks_hot(make_agent, make_origin, strategy):
    """The hottest source blocks stay the last to go at the destination.

    After the migration the destination's cache is full (every source block
    moved).  New misses on cold blocks (a quarter of the cache) must evict
    the source's coldest blocks, not its hottest: reading HOT afterwards
    still hits.  (cloudcache sends the whole cache under its bg_ws
    variant; its default sends the reuse working set only:
    test_cloudcache_variants.py.)
    """
    extra = {'cloudcache_variant': 'bg_ws'} if strategy == 'cloudcache' \
        else None
    src, dst, origin, orc, uri = warmed_volume(make_agent, make_origin,
                                               policy='read_only',
                                               src_extra=extra)
    res = migration.migrate(src.client(), dst.client(), 'vol1', strategy)
    assert res['state'] == 'completed', res
    st = dst.show('vol1')
    assert st['cached_blocks'] == VOLUME_CACHE // BS, st
    h = om.connect(st['export_uri'])
    # 512 blocks nobody has read lately: misses, each evicting one block.
    cold = (24 * MiB, 26 * MiB)
    before = dst.show('vol1')
    data, errors = om.read_range(h, cold[0], cold[1])
    assert not errors and not mu.check_range(orc, cold[0], data, 'cold')
    after = dst.show('vol1')
    misses = after['read_misses'] - before['read_misses']
    evicted = after['evictions'] - before['evictions']
    assert misses >= 256 and evicted >= 256, (before, after)
    ratio = mu.hit_pass(dst, 'vol1', h, orc, HOT[0], HOT[1],
                        'destination HOT after cold reads')
    om.close(h)
    assert ratio >= 0.9, (
        '%s: after %d misses evicted %d of the %d blocks the migration '
        'installed, only %.1f %% of the source\'s hottest 512 blocks are '
        'still cached at the destination: the copy installs blocks '
        'hottest first, each at the MRU end, so the destination\'s LRU '
        'order is the source\'s reversed and its hottest blocks are '
        'evicted first' % (strategy, misses, evicted, VOLUME_CACHE // BS,
                           100 * ratio))


def test_cli_migrate_wait_shows_progress(make_agent, make_origin):
    """migrate --wait: the firepan copy is followed while start runs."""
    src, dst, origin, orc, uri = warmed_volume(make_agent, make_origin)
    # 8 MiB at 4 MB/s: about 2 s in start, polled every 0.5 s.
    rc, out, err = mu.fcache(['migrate', 'vol1', '--from', src.control_socket,
                              '--to', dst.control_socket, '--strategy',
                              'firepan', '--rate-limit', '4', '--wait'])
    assert rc == 0, (rc, out, err)
    lines = err.splitlines()
    assert lines[0] == 'prepare', err
    starts = [line for line in lines if line.startswith('start, ')]
    assert len(starts) >= 2, err
    assert all(' of 8.0 MiB (' in line for line in starts), err
    done = [int(line.split(' of ')[0].split(', ')[1].split('.')[0])
            for line in starts if 'MiB of' in line]
    assert done == sorted(done), err
    assert 'switchover' in lines, err
    assert lines[-1].startswith('finish, '), err
    assert 'completed' in lines[-1], err
    assert '| state ' in out and 'completed' in out, out
    assert mu.volume_gone(src, 'vol1')
