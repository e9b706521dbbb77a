# SPDX-License-Identifier: Apache-2.0
"""One direction of the storage-move benchmark, looked at request by request.

bench/storage_move.py gives medians per cell; this runs a few systems in
one direction, on the same emulated media and workload, and prints for
each run what the medians hide: the move's lambdas and MC at gamma 0,
the downtime, and every workload request that took longer than its slot
(5 ms at the defaults) with when it started in the move.  That is how
the stalls of AIO's switch were found
(doc/research/storage-migration-bench.rst).

    .venv/bin/python bench/storage_move_probe.py --direction ssd-hdd \\
        --systems aio,qemu-bg --runs 3
    .venv/bin/python bench/storage_move_probe.py --systems dbt \\
        --move-args downtime_ms=6,converge_bytes=16384,max_rounds=200

``--move-args`` are passed to the agent's ``volume-move`` (fcache schemes
only).  Nothing is written; the media and workload options are
bench/storage_move.py's defaults.
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


def late_requests(wl, slot_s):
    """(start in the run, latency, 'r'/'w') of requests over one slot."""
    recs = [r for rs in wl.records for r in rs]
    if not recs:
        return []
    t0 = min(end - lat for end, _, lat in recs)
    return sorted((end - lat - t0, lat, 'w' if write else 'r')
                  for end, write, lat in recs if lat > slot_s)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--direction', default='ssd-hdd',
                    choices=['-'.join(d) for d in sm.DIRECTIONS])
    ap.add_argument('--systems', default='aio,qemu-bg',
                    help='comma-separated, of %s' % ', '.join(sm.SYSTEMS))
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--size', default='64M')
    ap.add_argument('--move-args', default='',
                    help='k=v,... for the agent volume-move')
    a = ap.parse_args(argv)
    systems = [s for s in a.systems.split(',') if s]
    bad = [s for s in systems if s not in sm.SYSTEMS]
    if bad:
        ap.error('unknown system(s) %s' % ', '.join(bad))
    extra = parse_move_args(a.move_args)
    src, dst = a.direction.split('-')
    args = sm.build_parser().parse_args(['--size', a.size])
    args.size = fclab.parse_size(args.size)
    slot_s = args.threads / args.rate_iops
    stamp = time.strftime('%Y%m%d-%H%M%S')
    imgdir = '/dev/shm/fcache-smprobe-%s' % stamp
    with fclab.Lab('/var/tmp/fcache-smprobe-%s' % stamp) as lab:
        os.makedirs(imgdir)
        try:
            agent = lab.agent('agent', 16 * sm.MiB, log_level='warning')
            bench = sm.Bench(args, lab, imgdir, agent)
            made = []
            make_workload = bench.workload

            def keep_workload(uri, seed):
                made.append(make_workload(uri, seed))
                return made[-1]

            bench.workload = keep_workload
            move_volume = agent.client.move_volume
            agent.client.move_volume = lambda *p, **k: move_volume(
                *p, **dict(k, **extra))
            plain = bench.plain_copy(src, dst)
            fast = 'ssd' if 'ssd' in (src, dst) else 'hdd'
            best = dict((fam, bench.baseline(fam, fast, 1000))
                        for fam in ('fcache', 'qemu'))
            print('%s->%s: plain copy %.2f s; no-move workload %s KB/s'
                  % (src, dst, plain, dict((f, round(v / 1e3))
                                           for f, v in best.items())))
            for rep in range(a.runs):
                for system in systems:
                    cell = bench.move(system, src, dst, 2000 + rep)
                    fam = 'qemu' if system in sm.QEMU_MODES else 'fcache'
                    m = sm.cell_metrics(cell, plain, best[fam], src, dst,
                                        args.size)
                    late = late_requests(made[-1], slot_s)
                    print('run %d %-8s %s %.2f s  lambda_time %.2f  '
                          'lambda_io %.4f  MC(g=0) %.4f  downtime %s ms  '
                          '%d requests, %d late' % (
                              rep + 1, system,
                              'done' if cell['ok'] else 'FAILED (%s)'
                              % cell.get('error'), cell['move_s'],
                              m['lambda_time'], m['lambda_io'], m['mc_0'],
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
