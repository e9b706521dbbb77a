# SPDX-License-Identifier: Apache-2.0
"""One direction of the storage-move benchmark, looked at request by request.

bench/storage_move.py gives medians per cell; this runs a few systems in
one direction, on the same emulated media and with one of its workloads,
and prints for each run what the medians hide: the move's lambdas and MC
at gamma 0.1, the downtime, and every workload request that took longer
than --late-ms with when it started in the move.  That is how the stalls
of AIO's switch were found (doc/research/storage-migration-bench.rst).

    .venv/bin/python bench/storage_move_probe.py --direction ssd-hdd \\
        --systems aio,qemu-bg --runs 3
    .venv/bin/python bench/storage_move_probe.py --systems dbt \\
        --move-args downtime_ms=6,converge_bytes=16384,max_rounds=200

``--move-args`` are passed to the agent's ``volume-move`` (fcache schemes
only).  Nothing is written; the media are bench/storage_move.py's
defaults.
"""

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import storage_move as sm  # noqa: E402

fclab = sm.fclab


def parse_move_args(text):
    """``k=v,k=v`` as a dict of ints, for the agent's volume-move."""
    out = {}
    for item in filter(None, text.split(',')):
        key, sep, value = item.partition('=')
        if not sep:
            raise SystemExit('--move-args: %r is not key=value' % item)
        try:
            out[key] = int(value)
        except ValueError:
            raise SystemExit('--move-args: %s=%r is not an integer'
                             % (key, value))
    return out


def late_requests(wl, late_s):
    """(start in the run, latency, 'r'/'w') of requests over ``late_s``."""
    recs = [r for rs in wl.records for r in rs]
    if not recs:
        return []
    t0 = min(end - lat for end, _, lat in recs)
    return sorted((end - lat - t0, lat, 'w' if write else 'r')
                  for end, write, lat in recs if lat > late_s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--direction', default='ssd-hdd',
                    choices=['-'.join(d) for d in sm.DIRECTIONS])
    ap.add_argument('--systems', default='aio,qemu-bg',
                    help='comma-separated, of %s' % ', '.join(sm.SYSTEMS))
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--size', default='64M')
    ap.add_argument('--profile', default='IOM_4',
                    choices=list(sm.smm.PROFILES))
    ap.add_argument('--late-ms', type=float, default=50.0,
                    help='print the requests slower than this (50)')
    ap.add_argument('--move-args', default='',
                    help='k=v,... for the agent volume-move')
    a = ap.parse_args(argv)
    systems = [s for s in a.systems.split(',') if s]
    bad = [s for s in systems if s not in sm.SYSTEMS]
    if bad:
        ap.error('unknown system(s) %s' % ', '.join(bad))
    extra = parse_move_args(a.move_args)
    src, dst = a.direction.split('-')
    args = sm.parse_args(['--size', a.size])
    profile = sm.smm.PROFILES[a.profile]
    stamp = time.strftime('%Y%m%d-%H%M%S')
    imgdir = '/dev/shm/fcache-smprobe-%s' % stamp
    made = []

    class KeptWorkload(sm.Workload):
        def __init__(self, *p, **k):
            super(KeptWorkload, self).__init__(*p, **k)
            made.append(self)

    sm.Workload = KeptWorkload
    with fclab.Lab('/var/tmp/fcache-smprobe-%s' % stamp) as lab:
        os.makedirs(imgdir)
        try:
            agent = lab.agent('agent', 16 * sm.MiB, log_level='warning')
            bench = sm.Bench(args, lab, imgdir, agent)
            move_volume = agent.client.move_volume
            agent.client.move_volume = lambda *p, **k: move_volume(
                *p, **dict(k, **extra))
            plain = bench.plain_copy(src, dst, args.size)
            fast = sm.faster(src, dst)
            best = dict((fam, bench.baseline(fam, fast, profile, 1000))
                        for fam in ('fcache', 'qemu'))
            print('%s->%s: plain copy %.2f s; no-move %s KB/s %s'
                  % (src, dst, plain, profile.name, dict(
                      (f, round(v['bytes_per_s'] / 1e3))
                      for f, v in best.items())))
            for rep in range(a.runs):
                for system in systems:
                    cell = bench.move(system, src, dst, profile, 2000 + rep)
                    fam = 'qemu' if system in sm.QEMU_MODES else 'fcache'
                    m = sm._figures(cell, plain, best[fam]['bytes_per_s'],
                                    src, dst, args.size, (0.1,))
                    late = late_requests(made[-1], a.late_ms / 1e3)
                    print('run %d %-8s %s %.2f s  lambda_time %.2f  '
                          'lambda_io %.4f  lambda_wear %.2f  MC(g=0.1) %s  '
                          'downtime %s ms  %d requests, %d late' % (
                              rep + 1, system, cell['outcome'] +
                              (' (%s)' % cell['error']
                               if cell['outcome'] != sm.DONE else ''),
                              cell['move_s'], m['lambda_time'],
                              m['lambda_io'], m['lambda_wear'],
                              sm.fmt(m['mc_0.1'], 4),
                              sm.fmt(cell['downtime_ms'], 1),
                              cell['workload']['ops'], len(late)),
                          flush=True)
                    if late:
                        print('    late (start s + ms):', ' '.join(
                            '%.3f+%.0f%s' % (t, lat * 1e3, kind)
                            for t, lat, kind in late))
        finally:
            shutil.rmtree(imgdir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(fclab.run_main(main, None, 'storage move probe'))
