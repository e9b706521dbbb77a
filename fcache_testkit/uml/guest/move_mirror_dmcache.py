# SPDX-License-Identifier: Apache-2.0
"""volume-move --scheme mirror on the dmcache engine (dm-mirror), in UML.

``python3 move_mirror_dmcache.py WRITE_POLICY``: a volume on $DEV_ORIGIN
moves to $DEV_ORIGIN_B (behind dm-delay: B takes each write 5 ms late,
so the copy takes seconds and a mirrored write waits for B) while a
writer and a reader run on the cache device, every read checked against
an oracle of the last acknowledged write.  The whole volume starts with
a known pattern and the writes land all over it, so a region B lacks at
the end is a block that differs.

1. A first move is aborted mid-copy: the volume is back on A, and A
   alone (read directly) holds every block the oracle expects.
2. A second move fails: B turns into the error target mid-copy; the
   volume is back on A, and A alone holds every block.
3. A third move: the agent is killed mid-move and restarted (the
   kernel kept copying; the move goes on), then killed again and every
   device removed, as a host reboot leaves them (the mirror is rebuilt,
   its in-memory region log lost, and the copy starts over from A).
4. After the switch the cache's table names B, the mirror is gone, and
   B alone (detached, read directly) holds every block of the oracle.

Prints ``RESULT {json}``.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_dmcache as ad  # noqa: E402
import dmutil  # noqa: E402
import move_dmcache as md  # noqa: E402

ORIGIN_B = os.environ['DEV_ORIGIN_B']
out = ad.out
check = ad.check
MIRROR = 'fcache-vol-mirror'
# The whole volume has a known pattern, and the VM stand-in writes all
# over it: a region B never got shows as a block that differs.
SPAN = 64 * ad.MiB
CHUNK = 256 * 1024
# B's write latency: enough for the copy to take seconds (1,024 regions,
# so the abort and the kill land mid-copy) and no longer than that.
B_DELAY_MS = 5


def major_minor(path):
    rdev = os.stat(path).st_rdev
    return '%d:%d' % (os.major(rdev), os.minor(rdev))


def cache_table():
    return ad.dmsetup('table fcache-vol').stdout


def mirror_status():
    return ad.dmsetup('status ' + MIRROR, check=False).stdout.strip()


def wait_state(a, states, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = a.ok('volume-move-status', volume_id='vol')
        if st['state'] in states:
            return st
        time.sleep(0.1)
    check(False, 'move did not reach %s: %r\nmirror: %s\nagent log: %s' % (
        states, st, mirror_status(),
        '\n'.join(ln for ln in a.logtext().splitlines()
                  if 'control:' not in ln)))


def start_move(a, b_dev):
    st = a.ok('volume-move', volume_id='vol', to=b_dev, scheme='mirror')
    check(st['state'] == 'copying', st)
    st = a.ok('volume-move-status', volume_id='vol')
    check(st['scheme'] == 'mirror' and st['engine_path'] == 'dm-mirror', st)
    check(ad.exists(MIRROR), 'no mirror device')
    mirror = ad.dmsetup('info -c --noheadings -o major,minor '
                        + MIRROR).stdout.strip()
    check(' %s ' % mirror in cache_table(),
          'cache not over the mirror: %s / %s' % (cache_table(), mirror))
    return st


def verify(dev, oracle, what):
    bad = []
    for chunk in range(0, max(oracle) + md.BLOCK, CHUNK):
        got = dmutil.pread(dev, chunk, CHUNK)
        bad += [off for off in range(chunk, chunk + CHUNK, md.BLOCK)
                if got[off - chunk:off - chunk + md.BLOCK] != oracle[off]]
    check(not bad, '%s: %d of %d blocks differ, first at %s: %r, expected %r'
          % (what, len(bad), len(oracle), bad[:8],
             dmutil.pread(dev, bad[0], md.BLOCK)[:16] if bad else b'',
             oracle[bad[0]][:16] if bad else b''))


def attach(a, a_dev, policy):
    dev = a.ok('volume-attach', volume_id='vol', origin=a_dev,
               cache_size='16M', write_policy=policy)['export_uri']
    for off in range(0, md.AREA, 64 * 1024):       # something cached
        dmutil.pread(dev, off, 64 * 1024)
    return dev


def set_b(sectors, table):
    """Replace slowb's table (B failing: the error target)."""
    ad.dmsetup('suspend slowb')
    ad.dmsetup("reload slowb --table '0 %d %s'" % (sectors, table))
    ad.dmsetup('resume slowb')


def main(policy):
    oracle = {}
    a_dev = ad.ORIGIN
    md.fill(a_dev, oracle, SPAN)
    bsz = dmutil.blksize(ORIGIN_B) // 512
    ad.dmsetup("create slowb --table '0 %d delay %s 0 0 %s 0 %d'"
               % (bsz, ORIGIN_B, ORIGIN_B, B_DELAY_MS))
    b_dev = '/dev/mapper/slowb'
    a = ad.Agent(cache_size='40M')
    a.start()
    caps = a.ok('capabilities')
    out['move_schemes'] = caps['move_schemes']
    check(caps['move_schemes'] == ['mirror', 'lr'], caps['move_schemes'])
    dev = attach(a, a_dev, policy)
    r = a.call('volume-move', volume_id='vol', to=b_dev, scheme='dbt')
    check(not r['ok'] and 'needs engine ucache' in r['error'] and
          'mirror (dm-mirror)' in r['error'], r)
    out['refused_dbt'] = r['error']
    r = a.call('volume-move', volume_id='vol', to=b_dev, scheme='mirror',
               rate_limit_mbps=10)
    check(not r['ok'] and 'rate-limit' in r['error'], r)

    # 1. Abort mid-copy: back to A, which has every write.
    wl = md.Workload(dev, oracle, SPAN)
    wl.start()
    time.sleep(0.5)
    start_move(a, b_dev)
    time.sleep(1.5)
    st = a.ok('volume-move-status', volume_id='vol')
    check(st['state'] == 'copying' and
          0 < st['regions_in_sync'] < st['regions_total'],
          'the copy is not under way: %r (%s)' % (st, mirror_status()))
    r = a.call('volume-detach', volume_id='vol')
    check(not r['ok'] and 'moving its origin' in r['error'], r)
    ab = a.ok('volume-move-abort', volume_id='vol')
    check(ab['state'] == 'aborted', ab)
    check(not ad.exists(MIRROR), 'mirror left after abort')
    check(' %s ' % major_minor(a_dev) in cache_table(),
          'cache not back on A: %s' % cache_table())
    out['aborted_at'] = {'regions_in_sync': st['regions_in_sync'],
                         'regions_total': st['regions_total']}
    wl.halt.set()
    wl.join()
    check(not wl.error, wl.error)
    reads, writes = wl.reads, wl.writes
    # The watcher's next look must not take the aborted move up again.
    time.sleep(0.3)
    st = a.ok('volume-move-status', volume_id='vol')
    check(st['state'] == 'aborted', 'after the abort: %r' % st)
    check(writes > 20, 'too few writes during the aborted move: %d' % writes)
    # A alone: detached (a write_back cache written back), read directly.
    a.ok('volume-detach', volume_id='vol')
    verify(a_dev, oracle, 'A after abort')
    dev = attach(a, a_dev, policy)

    # 2. B fails mid-copy: the kernel keeps writing A, the agent puts the
    # cache back on A; the VM's I/O goes on and A holds every block.
    wl = md.Workload(dev, oracle, SPAN)
    wl.rng.seed(11)
    wl.start()
    time.sleep(0.5)
    start_move(a, b_dev)
    time.sleep(1)
    set_b(bsz, 'error')
    st = wait_state(a, ('done', 'failed', 'aborted'))
    time.sleep(0.5)
    wl.halt.set()
    wl.join()
    check(not wl.error, wl.error)
    check(st['state'] == 'failed' and b_dev in st['error'] and
          'back on its source' in st['error'], st)
    out['b_failed'] = st['error']
    check(not ad.exists(MIRROR), 'mirror left after B failed')
    check(' %s ' % major_minor(a_dev) in cache_table(),
          'cache not back on A: %s' % cache_table())
    check(a.ok('volume-show', volume_id='vol')['origin'] == a_dev, 'origin')
    reads, writes = reads + wl.reads, writes + wl.writes
    a.ok('volume-detach', volume_id='vol')
    verify(a_dev, oracle, 'A after B failed')
    set_b(bsz, 'delay %s 0 0 %s 0 %d' % (ORIGIN_B, ORIGIN_B, B_DELAY_MS))
    dev = attach(a, a_dev, policy)

    # 3. The move, through an agent restart and a reboot.
    wl = md.Workload(dev, oracle, SPAN)
    wl.rng.seed(9)
    wl.start()
    time.sleep(0.5)
    start_move(a, b_dev)
    time.sleep(1)
    first = a.ok('volume-move-status', volume_id='vol')
    check(first['state'] == 'copying' and
          first['regions_in_sync'] < first['regions_total'],
          'the copy is too fast to test restarts: %r' % first)
    md.kill9(a)
    time.sleep(0.5)
    a.start()
    st = a.ok('volume-move-status', volume_id='vol')
    check(st['state'] in ('copying', 'done'), st)
    check('resuming the move' in a.logtext(), a.logtext())
    out['after_restart'] = st
    wl.halt.set()
    wl.join()
    check(not wl.error, wl.error)
    reads, writes = reads + wl.reads, writes + wl.writes
    md.kill9(a)
    rebooted = False
    if ad.exists(MIRROR):
        for n in ('fcache-vol', 'fcache-vol-cdata', 'fcache-vol-cmeta',
                  MIRROR):
            ad.dmsetup('remove ' + n)
        rebooted = True
    a.start()
    st = a.ok('volume-move-status', volume_id='vol')
    out['rebooted_mid_move'] = rebooted
    if rebooted:
        check(st['state'] == 'copying', st)
        check('the copy starts over' in a.logtext(), a.logtext())
    wl = md.Workload(dev, oracle, SPAN)
    wl.rng.seed(10)
    wl.start()
    done = wait_state(a, ('done', 'failed'))
    time.sleep(0.5)
    wl.halt.set()
    wl.join()
    check(done['state'] == 'done', done)
    check(not wl.error, wl.error)
    reads, writes = reads + wl.reads, writes + wl.writes
    show = a.ok('volume-show', volume_id='vol')
    check(show['origin'] == b_dev, show)
    check(not ad.exists(MIRROR), 'mirror left behind')
    check(' %s ' % major_minor(b_dev) in cache_table(),
          'cache not on B: %s' % cache_table())
    out['done'] = {k: done[k] for k in ('downtime_ms', 'regions_total',
                                        'regions_in_sync', 'bytes_total',
                                        'elapsed_s', 'pauses',
                                        'pause_ms_max')}
    out['reads'], out['writes'] = reads, writes
    check(writes > 50 and reads > 50, out)

    # 4. Through the cache, then B alone, equal the oracle.
    verify(dev, oracle, 'after the move')
    a.ok('volume-detach', volume_id='vol')
    verify(b_dev, oracle, 'B')
    st = a.ok('agent-status')
    check(st['used_bytes'] == 0, 'flash left allocated: %r' % st)
    a.stop()
    ad.dmsetup('remove slowb')
    out['ok'] = True
    dmutil.report(out)


if __name__ == '__main__':
    main(sys.argv[1])
