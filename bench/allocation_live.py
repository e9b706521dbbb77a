#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two VMs on one host, one of them running a backup scan.

The live check of on-demand allocation (doc/research/allocation-eval.rst, "Live
check"): one fcache agent, one cache device, two volumes on rate-limited
shared storage (nbdkit's rate filter).  The "app" volume runs a skewed
random read workload (fio, uniform) over a hot set that fits the cache; after
it has warmed up, the "backup" volume reads its whole disk sequentially
while the app goes on.  Both volumes may each use the whole cache
(cache_size = the device), so the agent's shares decide.

With admission ``all`` the backup's working set is its whole disk: its
predicted demand takes a large share and its scan evicts the app's blocks.
With admission ``rws`` (hybrid staging) the scan is never reused, its
demand is near zero, and the app keeps the flash.  For each admission the
app's bandwidth and block hit ratio are printed alone (warm) and during the
scan, with the shares at the end; medians of --runs runs, in one process on
one machine.

    .venv/bin/python bench/allocation_live.py [--runs 3] [--json FILE]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'tools'))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from fcdemo import lab as L  # noqa: E402
from nova_ext import agent as agent_mod  # noqa: E402

MiB = 1 << 20


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--runs', type=int, default=3)
    p.add_argument('--cache', default='64M', help='cache device size')
    p.add_argument('--hot-set', default='40M',
                   help="the app's hot set (fits the cache)")
    p.add_argument('--backup-size', default='512M',
                   help="the backup volume's disk, read once per pass")
    p.add_argument('--storage-rate', default='400M',
                   help="nbdkit rate filter, bits/s, per volume")
    p.add_argument('--warm-s', type=int, default=15)
    p.add_argument('--scan-s', type=int, default=20)
    p.add_argument('--window-s', type=int, default=2,
                   help='allocation_window of the agent')
    p.add_argument('--json', help='write the results here')
    args = p.parse_args(argv)
    args.cache_b = L.parse_size(args.cache)
    args.hot_b = L.parse_size(args.hot_set)
    args.backup_b = L.parse_size(args.backup_size)
    return args


def fio_app(lab, uri, args, seconds, seed):
    return L.fio_totals(lab.fio('app', [
        '--name=app', '--ioengine=nbd', '--uri=%s' % uri, '--rw=randread',
        '--bs=4k', '--iodepth=8', '--size=%d' % args.hot_b,
        '--norandommap', '--randrepeat=0',
        '--randseed=%d' % seed, '--time_based', '--runtime=%d' % seconds],
        timeout=seconds + 120, quiet=True))


def fio_backup(lab, uri, args, seconds):
    return L.fio_totals(lab.fio('backup', [
        '--name=backup', '--ioengine=nbd', '--uri=%s' % uri, '--rw=read',
        '--bs=1M', '--iodepth=4', '--size=%d' % args.backup_b,
        '--time_based', '--runtime=%d' % seconds],
        timeout=seconds + 120, quiet=True))


def hit_delta(before, after):
    h = after['read_hits'] - before['read_hits']
    m = after['read_misses'] - before['read_misses']
    return h / (h + m) if h + m else 0.0


def one_run(args, admission, seed):
    with tempfile.TemporaryDirectory(prefix='fcalloc-') as d, \
            L.Lab(d) as lab:
        uris = {}
        sizes = (('app', args.hot_b * 2), ('backup', args.backup_b))
        for name, size in sizes:
            path = os.path.join(d, name + '.img')
            with open(path, 'wb') as f:
                f.truncate(size)
            L.fill(lab, path, 0, min(size, args.hot_b * 2))
            _, uris[name] = lab.nbdkit(
                'storage-' + name,
                ['file', path, 'rate=%s' % args.storage_rate],
                filters=['rate'])
        agent = lab.agent('agent', args.cache_b,
                          allocation_window=args.window_s,
                          **L.FIO_AGENT_KEYS)
        client = agent_mod.AgentClient(agent.conf['control_socket'])
        exports = {}
        for name in ('app', 'backup'):
            kw = {'cache_size': args.cache_b, 'admission': admission}
            if admission == 'rws':
                kw.update(rws_n=1, staging='hybrid')
            exports[name] = client.attach_volume(name, uris[name],
                                                 **kw)['export_uri']

        before = client.show_volume('app')
        warm = fio_app(lab, exports['app'], args, args.warm_s, seed)
        mid = client.show_volume('app')
        out = {}

        def backup():
            out['backup'] = fio_backup(lab, exports['backup'], args,
                                       args.scan_s)

        t = threading.Thread(target=backup)
        t.start()
        during = fio_app(lab, exports['app'], args, args.scan_s, seed + 1)
        t.join()
        after = client.show_volume('app')
        alloc = {v['id']: v for v in client.allocation()['volumes']}
        backup_show = client.show_volume('backup')
        return {
            'admission': admission,
            'app_warm_mb_s': warm['mb_per_s'],
            'app_warm_hit': hit_delta(before, mid),
            'app_scan_mb_s': during['mb_per_s'],
            'app_scan_hit': hit_delta(mid, after),
            'backup_mb_s': out['backup']['mb_per_s'],
            'app_share_mib': alloc['app']['share_bytes'] / MiB,
            'backup_share_mib': alloc['backup']['share_bytes'] / MiB,
            'backup_cached_mib': backup_show['cached_blocks'] * 4096 / MiB,
            'backup_rwss_mib': (alloc['backup']['rwss_observed_bytes'] or 0)
            / MiB,
        }


def main(argv):
    args = parse_args(argv)
    runs = []
    for i in range(args.runs):
        for admission in ('all', 'rws'):
            r = one_run(args, admission, seed=1000 + i)
            runs.append(r)
            print('run %d %-3s: app %.1f MB/s hit %.2f alone, %.1f MB/s hit '
                  '%.2f during the scan; backup %.1f MB/s; shares app %.0f '
                  'backup %.0f MiB' % (
                      i + 1, admission, r['app_warm_mb_s'],
                      r['app_warm_hit'], r['app_scan_mb_s'],
                      r['app_scan_hit'], r['backup_mb_s'],
                      r['app_share_mib'], r['backup_share_mib']),
                  flush=True)
    keys = ('app_warm_mb_s', 'app_warm_hit', 'app_scan_mb_s', 'app_scan_hit',
            'backup_mb_s', 'app_share_mib', 'backup_share_mib',
            'backup_cached_mib', 'backup_rwss_mib')
    med = {}
    for admission in ('all', 'rws'):
        rs = [r for r in runs if r['admission'] == admission]
        med[admission] = {k: statistics.median(r[k] for r in rs)
                          for k in keys}
    print('\nmedians of %d runs (cache %s, app hot set %s, backup disk %s, '
          'storage %s bit/s per volume):' % (args.runs, args.cache,
                                             args.hot_set, args.backup_size,
                                             args.storage_rate))
    hdr = ('admission', 'app MB/s alone', 'during scan', 'kept',
           'app hit alone', 'during scan', 'backup MB/s', 'share app/backup '
           'MiB', 'backup cached MiB')
    print(' | '.join(hdr))
    for admission in ('all', 'rws'):
        m = med[admission]
        print(' | '.join([
            admission, '%.1f' % m['app_warm_mb_s'],
            '%.1f' % m['app_scan_mb_s'],
            '%.0f %%' % (100 * m['app_scan_mb_s'] / m['app_warm_mb_s']),
            '%.3f' % m['app_warm_hit'], '%.3f' % m['app_scan_hit'],
            '%.1f' % m['backup_mb_s'],
            '%.0f / %.0f' % (m['app_share_mib'], m['backup_share_mib']),
            '%.1f' % m['backup_cached_mib']]))
    print('app during the scan, rws vs all: %.2fx bandwidth, hit ratio '
          '%.3f vs %.3f' % (med['rws']['app_scan_mb_s'] /
                            med['all']['app_scan_mb_s'],
                            med['rws']['app_scan_hit'],
                            med['all']['app_scan_hit']))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'runs': runs, 'medians': med, 'args': vars(args)}, f,
                      indent=2)
    return 0


if __name__ == '__main__':
    sys.exit(L.run_main(main, sys.argv[1:], 'allocation live check'))
