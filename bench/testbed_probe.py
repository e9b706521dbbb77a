#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Why is a background copy slow?  Copy time with the VM paused vs running.

For each strategy that copies after the switch (firepan_if, cloudcache,
hybrid), on the testbed of tools/testbed.py: a VM warms a cache on host A,
migrates to host B, and the time from switchover to "completed" is measured
twice, once with the VM kept paused until the copy is done (the copy alone,
against the rate limit) and once with the VM running (as in the
experiment).  A copy that slows down many times over while the VM runs
waits on the VM's I/O, not on the link.  With the VM running it also
prints the rate achieved over the copy as a fraction of the link limit
(target >= 0.9: the copy gets its share while the VM and the neighbours
run at full speed).  doc/research/testbed.rst has the figures.

  bench/testbed_probe.py [--cache-size 16M] [--runs 2] [--storage-rate 8G]
      [--link-mbps 40,80] [--job-size 32M] [--strategies hybrid]
"""

import argparse
import os
import statistics
import sys
import time

# The testbed's lab (tools/fcdemo) starts nbdkit, agents and VMs.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'tools'))

from fcdemo import lab as L  # noqa: E402
from fcdemo import testbed as T  # noqa: E402
from fcdemo import vm as V  # noqa: E402
from nova_ext import migration  # noqa: E402

STRATEGIES = ('firepan_if', 'cloudcache', 'hybrid')


def wait_completed(dst, mid, timeout=600):
    """The moment the destination says the copy is done.

    Polled at 20 ms: finish() polls more coarsely than a short copy lasts.
    """
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = migration.status(dst, mid)
        if st['state'] in ('completed', 'failed'):
            return time.monotonic(), st
        time.sleep(0.02)
    raise RuntimeError('migration %s did not complete' % mid)


def one(bed, strategy, size, running, n, link_mbps):
    cfg = bed.cfg
    src = bed.agents['host-a'].client
    dst = bed.agents['host-b'].client
    vid = 'p-%s-%s-%d-%d' % (strategy, 'run' if running else 'idle', n,
                             link_mbps)
    uri = bed.disk(vid)
    att = src.attach_volume(vid, uri, cache_size=size,
                            write_policy=cfg.write_policy)
    vm = V.Vm(bed.lab, vid, att['export_uri'], cfg.job_size, seed=n)
    try:
        time.sleep(cfg.warm_s)
        prep = migration.prepare(src, dst, vid, strategy,
                                 rate_limit_mbps=link_mbps)
        mid = prep['migration_id']
        migration.start(src, dst, mid)
        vm.pause()
        cached = src.show_volume(vid)['cached_blocks']
        vm.switch(prep['export_uri'])
        t0 = time.monotonic()
        migration.switchover(src, dst, mid)
        if running:
            vm.resume()
        t1, _ = wait_completed(dst, mid)
        copy_s = t1 - t0
        res = migration.finish(src, dst, mid, timeout_s=600)
        if not running:
            vm.resume()
        time.sleep(1)
        V.check_clean(vm, vm.quit())
        dst.detach_volume(vid)
    finally:
        if vm.proc.alive():
            bed.lab.stop(vm.proc)
        bed.remove_disk(vid)
    return {'strategy': strategy, 'vm': 'running' if running else 'paused',
            'link_mbps': link_mbps,
            'achieved_over_limit': res['bytes_transferred'] / copy_s /
            (link_mbps * 1e6),
            'cached_blocks': cached, 'copy_s': copy_s,
            'bytes': res['bytes_transferred'],
            'fetched': res['fetched_blocks'],
            'discarded': res['discarded_copies']}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=(
        argparse.RawDescriptionHelpFormatter))
    p.add_argument('--cache-size', default='16M')
    p.add_argument('--runs', type=int, default=2)
    p.add_argument('--storage-rate', default=T.Config.DEFAULTS['storage_rate'],
                   help="nbdkit rate= of the shared storage (e.g. 8G: "
                   "not the bottleneck any more)")
    p.add_argument('--strategies', default=','.join(STRATEGIES))
    p.add_argument('--link-mbps', default=None,
                   help='migration rate limits to probe, comma-separated '
                   '(default: the testbed\'s)')
    p.add_argument('--job-size', default=None,
                   help="vmload's area per job (default: the testbed's)")
    p.add_argument('--warm-s', type=float, default=None,
                   help='seconds the VM warms its cache before the '
                   'migration (default: the testbed\'s)')
    p.add_argument('--outdir', default=os.path.join(L.REPO, '.demo',
                                                    'testbed-probe'))
    args = p.parse_args(argv)
    size = int(args.cache_size.rstrip('Mm')) * L.MiB
    kw = {}
    if args.job_size:
        kw['job_size'] = int(args.job_size.rstrip('Mm')) * L.MiB
    if args.warm_s is not None:
        kw['warm_s'] = args.warm_s
    cfg = T.Config(cache_sizes=(size,), storage_rate=args.storage_rate, **kw)
    links = [float(x) for x in args.link_mbps.split(',')] \
        if args.link_mbps else [cfg.link_mbps]
    strategies = args.strategies.split(',')
    rows = []
    with L.Lab(os.path.join(os.path.abspath(args.outdir), 'run')) as lab:
        bed = T.Testbed(lab, cfg).start()
        for n in range(args.runs):
            for link in links:
                for st in strategies:
                    for running in (False, True):
                        r = one(bed, st, size, running, n, link)
                        print('%-10s link %3.0f MB/s VM %-7s %5d blocks  '
                              '%6.2f s  %6.2f MB/s (%.2f x limit)  fetched '
                              '%4d  discarded %4d  load %.1f'
                              % (r['strategy'], link, r['vm'],
                                 r['cached_blocks'], r['copy_s'],
                                 r['bytes'] / r['copy_s'] / 1e6,
                                 r['achieved_over_limit'], r['fetched'],
                                 r['discarded'], os.getloadavg()[0]),
                              flush=True)
                        rows.append(r)
        bed.stop_neighbours()
    for link in links:
        print('\nmedian switchover-to-completed time, link limit %g MB/s:'
              % link)
        for st in strategies:
            sel = [r for r in rows if r['strategy'] == st and
                   r['link_mbps'] == link]
            t = {m: statistics.median(r['copy_s'] for r in sel
                                      if r['vm'] == m)
                 for m in ('paused', 'running')}
            a = statistics.median(r['achieved_over_limit'] for r in sel
                                  if r['vm'] == 'running')
            print('  %-10s VM paused %6.2f s   VM running %6.2f s   (x%.1f)'
                  '   achieved with the VM running: %.2f x the limit'
                  % (st, t['paused'], t['running'],
                     t['running'] / t['paused'] if t['paused'] else 0, a))
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main(sys.argv[1:]))
    except L.LabError as exc:
        print('probe failed: %s' % exc, file=sys.stderr)
        sys.exit(1)
