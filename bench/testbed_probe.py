#!/usr/bin/env python3
"""Why is a background copy slow?  Copy time with the VM paused vs running.

For each strategy that copies after the switch (firepan_if, cloudcache,
hybrid), on the testbed of tools/testbed.py: a VM warms a cache on host A,
migrates to host B, and the time from switchover to "completed" is measured
twice, once with the VM kept paused until the copy is done (the copy alone,
against the rate limit) and once with the VM running (as in the
experiment).  A copy that slows down many times over while the VM runs
waits on the VM's I/O, not on the link.  doc/testbed.rst has the figures.

  bench/testbed_probe.py [--cache-size 16M] [--runs 2] [--storage-rate 8G]
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


def one(bed, strategy, size, running, n):
    cfg = bed.cfg
    src = bed.agents['host-a'].client
    dst = bed.agents['host-b'].client
    vid = 'p-%s-%s-%d' % (strategy, 'run' if running else 'idle', n)
    uri = bed.disk(vid)
    att = src.attach_volume(vid, uri, cache_size=size,
                            write_policy=cfg.write_policy)
    vm = V.Vm(bed.lab, vid, att['export_uri'], cfg.job_size, seed=n)
    try:
        time.sleep(cfg.warm_s)
        prep = migration.prepare(src, dst, vid, strategy,
                                 rate_limit_mbps=cfg.link_mbps)
        mid = prep['migration_id']
        migration.start(src, dst, mid)
        vm.pause()
        cached = src.show_volume(vid)['cached_blocks']
        vm.switch(prep['export_uri'])
        t0 = time.monotonic()
        migration.switchover(src, dst, mid)
        if running:
            vm.resume()
        res = migration.finish(src, dst, mid, timeout_s=600)
        copy_s = time.monotonic() - t0
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
    p.add_argument('--outdir', default=os.path.join(L.REPO, '.demo',
                                                    'testbed-probe'))
    args = p.parse_args(argv)
    size = int(args.cache_size.rstrip('Mm')) * L.MiB
    cfg = T.Config(cache_sizes=(size,), storage_rate=args.storage_rate)
    strategies = args.strategies.split(',')
    rows = []
    with L.Lab(os.path.join(os.path.abspath(args.outdir), 'run')) as lab:
        bed = T.Testbed(lab, cfg).start()
        for n in range(args.runs):
            for st in strategies:
                for running in (False, True):
                    r = one(bed, st, size, running, n)
                    print('%-10s VM %-7s %5d blocks  %6.2f s  %6.2f MB/s '
                          ' fetched %4d  discarded %4d'
                          % (r['strategy'], r['vm'], r['cached_blocks'],
                             r['copy_s'], r['bytes'] / r['copy_s'] / 1e6,
                             r['fetched'], r['discarded']), flush=True)
                    rows.append(r)
        bed.stop_neighbours()
    print('\nmedian switchover-to-completed time, link limit %g MB/s:'
          % cfg.link_mbps)
    for st in strategies:
        t = {m: statistics.median(r['copy_s'] for r in rows
                                  if r['strategy'] == st and r['vm'] == m)
             for m in ('paused', 'running')}
        print('  %-10s VM paused %6.2f s   VM running %6.2f s   (x%.1f)'
              % (st, t['paused'], t['running'],
                 t['running'] / t['paused'] if t['paused'] else 0))
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main(sys.argv[1:]))
    except L.LabError as exc:
        print('probe failed: %s' % exc, file=sys.stderr)
        sys.exit(1)
