# SPDX-License-Identifier: Apache-2.0
"""volume-move on the dmcache engine (dm-clone), inside UML.

``python3 move_dmcache.py WRITE_POLICY``: a volume on $DEV_ORIGIN moves
to $DEV_ORIGIN_B (behind dm-delay, so that hydration takes seconds) while
a writer and a reader run on the cache device, every read checked
against an oracle of the last acknowledged write.  Mid-move the agent is
killed and restarted (the move goes on), then killed again and every
device removed, as a host reboot leaves them (the clone is rebuilt over
its metadata and the move goes on).  After the switch the volume reads
from B only: detached, B itself holds every block the oracle expects.
Prints ``RESULT {json}``.
"""

import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_dmcache as ad  # noqa: E402
import dmutil  # noqa: E402

MiB = ad.MiB
BLOCK = 4096
AREA = 8 * MiB                   # what the VM stand-in reads and writes
ORIGIN_B = os.environ['DEV_ORIGIN_B']
out = ad.out
check = ad.check


class Workload(threading.Thread):
    """4 KiB writes and reads over the first area bytes, each read checked."""

    def __init__(self, dev, oracle, area=AREA):
        super().__init__(daemon=True)
        self.dev = dev
        self.oracle = oracle
        self.area = area
        self.halt = threading.Event()
        self.reads = self.writes = 0
        self.error = None
        self.rng = random.Random(7)

    def run(self):
        try:
            while not self.halt.is_set():
                off = self.rng.randrange(self.area // BLOCK) * BLOCK
                if self.rng.random() < 0.4:
                    data = dmutil.pattern('w%d@%d' % (self.writes, off),
                                          BLOCK)
                    dmutil.pwrite(self.dev, off, data)
                    self.oracle[off] = data
                    self.writes += 1
                else:
                    got = dmutil.pread(self.dev, off, BLOCK)
                    if got != self.oracle[off]:
                        self.error = 'read at %d: %r, expected %r' % (
                            off, got[:16], self.oracle[off][:16])
                        return
                    self.reads += 1
        except Exception as exc:       # reported as the scenario's failure
            self.error = 'workload: %s' % exc


def fill(dev, oracle, area=AREA):
    for off in range(0, area, 256 * 1024):
        chunk = b''.join(dmutil.pattern('a@%d' % (off + i), BLOCK)
                         for i in range(0, 256 * 1024, BLOCK))
        dmutil.pwrite(dev, off, chunk)
        for i in range(0, 256 * 1024, BLOCK):
            oracle[off + i] = chunk[i:i + BLOCK]


def wait_state(a, states, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = a.ok('volume-move-status', volume_id='vol')
        if st['state'] in states:
            return st
        time.sleep(0.1)
    check(False, 'move did not reach %s: %r\nclone: %s\nagent log: %s' % (
        states, st, ad.dmsetup('status fcache-vol-clone', check=False).stdout,
        '\n'.join(ln for ln in a.logtext().splitlines()
                  if 'control:' not in ln)))


def kill9(a):
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(30)


def main(policy):
    oracle = {}
    a_dev = ad.ORIGIN
    fill(a_dev, oracle)
    # B answers writes 20 ms late: one 64 KiB region at a time, 64 MiB
    # would take 20 s, long enough to restart the agent twice in it.
    bsz = dmutil.blksize(ORIGIN_B) // 512
    ad.dmsetup("create slowb --table '0 %d delay %s 0 0 %s 0 20'"
               % (bsz, ORIGIN_B, ORIGIN_B))
    b_dev = '/dev/mapper/slowb'
    a = ad.Agent(cache_size='40M')
    a.start()
    dev = a.ok('volume-attach', volume_id='vol', origin=a_dev,
               cache_size='16M', write_policy=policy)['export_uri']
    for off in range(0, AREA, 64 * 1024):       # something cached
        dmutil.pread(dev, off, 64 * 1024)
    wl = Workload(dev, oracle)
    wl.start()
    time.sleep(1)

    for scheme, why in (('dbt', 'needs engine ucache'),
                        ('slr', 'needs engine ucache')):
        r = a.call('volume-move', volume_id='vol', to=b_dev, scheme=scheme)
        check(not r['ok'] and why in r['error'], r)
        out['refused_' + scheme] = r['error']
    r = a.call('volume-move', volume_id='vol', to=a_dev, scheme='lr')
    check(not r['ok'] and 'origin already' in r['error'], r)

    st = a.ok('volume-move', volume_id='vol', to=b_dev, scheme='lr')
    check(st['state'] == 'copying', st)
    # One region at a time, so that the restarts below land mid-move; the
    # table the agent rebuilds after the reboot has its own settings again.
    ad.dmsetup('message fcache-vol-clone 0 hydration_batch_size 1')
    ad.dmsetup('message fcache-vol-clone 0 hydration_threshold 1')
    check(ad.exists('fcache-vol-clone') and ad.exists('fcache-vol-clmeta'),
          'no clone devices')
    table = ad.dmsetup('table fcache-vol').stdout
    info = ad.dmsetup('info -c --noheadings -o major,minor '
                      'fcache-vol-clone').stdout.strip()
    check(info in table, 'cache not over the clone: %s / %s' % (table, info))
    r = a.call('volume-move-abort', volume_id='vol')
    check(not r['ok'] and 'cannot abort' in r['error'], r)
    out['refused_abort'] = r['error']
    r = a.call('volume-detach', volume_id='vol')
    check(not r['ok'] and 'moving its origin' in r['error'], r)
    time.sleep(0.5)
    first = a.ok('volume-move-status', volume_id='vol')
    check(first['state'] == 'copying' and
          first['regions_hydrated'] < first['regions_total'],
          'hydration too fast to test restarts: %r' % first)

    # Agent killed mid-move: the kernel goes on; the restarted agent
    # picks the move up.
    kill9(a)
    time.sleep(0.5)
    a.start()
    st = a.ok('volume-move-status', volume_id='vol')
    check(st['state'] in ('copying', 'done'), st)
    check('resuming the move' in a.logtext(), a.logtext())
    out['after_restart'] = st

    # Host reboot: every device gone; the clone comes back over its
    # metadata (hydrated regions stay hydrated) before the cache.
    wl.halt.set()
    wl.join()
    check(not wl.error, wl.error)
    hydrated_before = a.ok('volume-move-status',
                           volume_id='vol')['regions_hydrated']
    kill9(a)
    rebooted = False
    if ad.exists('fcache-vol-clone'):
        for n in ('fcache-vol', 'fcache-vol-cdata', 'fcache-vol-cmeta',
                  'fcache-vol-clone', 'fcache-vol-clmeta'):
            ad.dmsetup('remove ' + n)
        rebooted = True
    a.start()
    st = a.ok('volume-move-status', volume_id='vol')
    if rebooted:
        check(st['regions_hydrated'] >= hydrated_before,
              'hydration lost at reboot: %d -> %r' % (hydrated_before, st))
    out['rebooted_mid_move'] = rebooted
    wl2 = Workload(dev, oracle)
    wl2.rng.seed(8)
    wl2.start()
    done = wait_state(a, ('done', 'failed'))
    time.sleep(0.5)
    wl2.halt.set()
    wl2.join()
    check(done['state'] == 'done', done)
    check(not wl2.error, wl2.error)
    show = a.ok('volume-show', volume_id='vol')
    check(show['origin'] == b_dev, show)
    check(not ad.exists('fcache-vol-clone') and
          not ad.exists('fcache-vol-clmeta'), 'clone devices left behind')
    b_major_minor = ad.dmsetup('info -c --noheadings -o major,minor '
                               'slowb').stdout.strip()
    check(b_major_minor in ad.dmsetup('table fcache-vol').stdout,
          'cache not on B')
    out['done'] = {k: done[k] for k in ('downtime_ms', 'regions_total',
                                        'bytes_total', 'elapsed_s', 'pauses',
                                        'pause_ms_max')}
    out['reads'] = wl.reads + wl2.reads
    out['writes'] = wl.writes + wl2.writes
    check(out['writes'] > 50 and out['reads'] > 50, out)

    # After the switch: every block through the cache, then (detached,
    # written back) on B itself, equals the oracle.  A is left as it was
    # at the start plus nothing: the move's writes went to B only.
    for off, data in oracle.items():
        check(dmutil.pread(dev, off, BLOCK) == data, 'after move at %d' % off)
    a.ok('volume-detach', volume_id='vol')
    for off, data in oracle.items():
        check(dmutil.pread(b_dev, off, BLOCK) == data, 'B at %d' % off)
    st = a.ok('agent-status')
    check(st['used_bytes'] == 0, 'flash left allocated: %r' % st)
    a.stop()
    ad.dmsetup('remove slowb')
    out['ok'] = True
    dmutil.report(out)


if __name__ == '__main__':
    main(sys.argv[1])
