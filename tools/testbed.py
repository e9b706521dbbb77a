#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fcache testbed: the FirepanIF evaluation (section 4), time-scaled.

Starts shared storage (nbdkit, rate- and delay-limited), two hosts (an
fcache-agent each) and neighbour VMs on both, then for every cache size,
run and strategy: a target VM (vmload: fio's Figure-5 job over NBD, every
read checked) runs without cache, gets a cache and warms it, is live
migrated from host A to host B with the strategy, and continues.  Prints a
Table 1-3 style table (medians, [min..max] over runs), writes
results.json, results.csv, table.txt and PNG plots (Figures 7/10 style)
into --outdir.  doc/research/testbed.rst explains every figure.

  tools/testbed.py --quick      the demo (tools/run-demo.sh), < 5 minutes
  tools/testbed.py              the full experiment (3 sizes, 3 runs)
  tools/testbed.py --smoke      the CI smoke run (< 2 minutes)
"""

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fcdemo import experiment  # noqa: E402
from fcdemo import lab as L  # noqa: E402
from fcdemo import plots  # noqa: E402
from fcdemo import report  # noqa: E402
from fcdemo import testbed as T  # noqa: E402

ALL = T.Config.DEFAULTS['strategies']

# Presets: (settings); the full experiment is Config's defaults + runs=3.
PRESETS = {
    'full': dict(runs=3),
    'quick': dict(cache_sizes=(16 * L.MiB,)),
    'smoke': dict(cache_sizes=(12 * L.MiB,), job_size=4 * L.MiB,
                  strategies=('none', 'firepan', 'firepan_if', 'hybrid'),
                  nocache_s=1.5, warm_s=10.0, pre_s=3.0, first_s=4.0,
                  total_s=6.0, neighbour_warm_s=2.0, storage_rate='48M'),
}

# Scales of the demo (issue 13): at 4x the working set and cache the
# storage rate and the link double and the windows grow with the time the
# cache takes to warm at that storage rate (4x the cache at 2x the rate);
# 16x doubles each again.  Applied over a preset, before explicit options.
SCALES = {
    1: {},
    4: dict(job_size=32 * L.MiB, cache_sizes=(64 * L.MiB,),
            storage_rate='64M', link_mbps=40.0, warm_s=20.0, first_s=10.0,
            total_s=20.0),
    16: dict(job_size=128 * L.MiB, cache_sizes=(256 * L.MiB,),
             storage_rate='128M', link_mbps=80.0, warm_s=40.0, first_s=20.0,
             total_s=40.0),
}


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument('--quick', dest='preset', action='store_const',
                   const='quick', help='the demo: one cache size, one run')
    g.add_argument('--smoke', dest='preset', action='store_const',
                   const='smoke', help='the CI smoke run')
    p.add_argument('--scale', type=int, choices=sorted(SCALES), default=1,
                   help="the demo's working set, cache, storage rate, link "
                   "and windows scaled (doc/research/testbed.rst); the "
                   "preset's runs and strategies stay")
    p.add_argument('--sizes', help='cache sizes, comma-separated (e.g. '
                   '8M,16M,32M)')
    p.add_argument('--runs', type=int, help='repetitions (medians)')
    p.add_argument('--strategies', help='comma-separated, from: %s'
                   % ','.join(ALL))
    p.add_argument('--job-size', type=L.parse_size,
                   help="each of the VM's 4 job regions (working set = "
                   "4x this; the disk is 2.5x the working set)")
    p.add_argument('--storage-rate', help="shared storage bandwidth, "
                   "nbdkit rate filter's bits/s (e.g. 64M)")
    p.add_argument('--storage-delay-ms', type=float)
    p.add_argument('--link-mbps', type=float,
                   help='migration link: rate limit per migration, MB/s')
    p.add_argument('--neighbours', type=int, help='neighbour VMs per host')
    p.add_argument('--write-policy', choices=('read_only', 'write_through',
                                              'write_back'),
                   help='cache write policy of every volume (the paper: '
                   'read_only)')
    for name in ('nocache', 'warm', 'pre', 'first', 'total'):
        p.add_argument('--%s-s' % name, type=float, dest='%s_s' % name)
    p.add_argument('--seed', type=int)
    p.add_argument('--outdir', default=os.path.join(L.REPO, '.demo',
                                                    'testbed'),
                   help='results and scratch files (default: %(default)s)')
    p.add_argument('--no-plot', action='store_true')
    p.add_argument('--report-only', metavar='RESULTS_JSON',
                   help='run nothing: recompute the table, files and plots '
                   'of an earlier run from its results.json into --outdir')
    p.add_argument('-v', '--verbose', action='store_true')
    args = p.parse_args(argv)
    settings = dict(PRESETS[args.preset or 'full'])
    if args.scale != 1:
        if args.preset == 'smoke':
            p.error('--scale applies to the demo and the full run, not to '
                    '--smoke')
        settings.update(SCALES[args.scale])
    if args.sizes:
        settings['cache_sizes'] = tuple(L.parse_size(s)
                                        for s in args.sizes.split(','))
    if args.strategies:
        sts = tuple(s.strip() for s in args.strategies.split(','))
        bad = [s for s in sts if s not in ALL]
        if bad:
            p.error('unknown strategies: %s' % ', '.join(bad))
        if 'none' not in sts:
            p.error('--strategies must include none (the baseline)')
        settings['strategies'] = sts
    for k in ('runs', 'job_size', 'storage_rate', 'storage_delay_ms',
              'link_mbps', 'neighbours', 'nocache_s', 'warm_s', 'pre_s',
              'first_s', 'total_s', 'seed', 'write_policy'):
        if getattr(args, k) is not None:
            settings[k] = getattr(args, k)
    cfg = T.Config(**settings)
    if cfg.first_s > cfg.total_s or cfg.pre_s > cfg.warm_s:
        p.error('need --first-s <= --total-s and --pre-s <= --warm-s')
    if any(s > cfg.disk_size or s % (4 * L.KiB) for s in cfg.cache_sizes):
        p.error('cache sizes must be multiples of 4K within the disk')
    return args, cfg


def run(cfg, outdir, verbose=False, log=print):
    """Run the experiment; returns (records, rows, aggregates, checks)."""
    work = os.path.join(outdir, 'run')
    shutil.rmtree(work, ignore_errors=True)
    records = []
    with L.Lab(work, verbose=verbose) as lab:
        bed = T.Testbed(lab, cfg).start()
        log('testbed up: storage %s bit/s (+%g ms), agents %s, %d neighbour '
            'VM(s) per host; warming the neighbours %g s'
            % (cfg.storage_rate, cfg.storage_delay_ms,
               ', '.join(T.HOSTS), cfg.neighbours, cfg.neighbour_warm_s))
        time.sleep(cfg.neighbour_warm_s)
        log('flash probe on %s: %.2f MB/s for one VM whose reads hit '
            '(hit ratio %.3f)' % (bed.flash['host'],
                                  bed.flash['vm_flash_bps'] / 1e6,
                                  bed.flash['hit_ratio'] or 0.0))
        n = len(cfg.strategies) * len(cfg.cache_sizes) * cfg.runs
        i = 0
        for r in range(cfg.runs):
            # Peers take turns in going first (the neighbours' caches and
            # the machine's load drift during a run).
            k = r % len(cfg.strategies)
            order = cfg.strategies[k:] + cfg.strategies[:k]
            for size in cfg.cache_sizes:
                for st in order:
                    i += 1
                    rec = experiment.run_one(bed, st, size, r,
                                             seed=cfg.seed * 1000 + r)
                    m = report.metrics(rec, cfg)
                    log('[%d/%d] run %d cache %dM %-10s first %6.2f MB/s '
                        'whole %6.2f  downtime %5.0f ms  migration %5.1f s'
                        '  storage rd/10k %5.0f'
                        % (i, n, r, size >> 20, st, m['first_mbps'],
                           m['whole_mbps'], m['downtime_ms'],
                           m['migration_s'], m['storage_reads_per_10k']))
                    records.append(rec)
        neighbours = bed.stop_neighbours()
        commands = lab.commands
    res = analyse(records, cfg)
    res.update(neighbour_final=neighbours, commands=commands,
               flash=bed.flash)
    return res


def analyse(records, cfg):
    rows = [report.metrics(rec, cfg) for rec in records]
    report.add_pct_over_none(rows)
    return {'records': records, 'rows': rows,
            'aggregates': report.aggregate(rows, cfg.strategies,
                                           cfg.cache_sizes),
            'checks': report.checks(rows, records, cfg, cfg.cache_sizes)}


def reload(path, windows=None):
    """Records and configuration of an earlier run's results.json."""
    import json
    with open(path) as f:
        old = json.load(f)
    settings = {k: (tuple(v) if isinstance(v, list) else v)
                for k, v in old['config'].items()
                if k in T.Config.DEFAULTS}
    settings.update(windows or {})
    cfg = T.Config(**settings)
    res = analyse(old['records'], cfg)
    res.update(neighbour_final=old['neighbour_final'],
               commands=old['commands'], flash=old.get('flash'))
    return res, cfg


def write_outputs(res, cfg, outdir, argv, plot=True):
    paths = {}
    tbl = report.table(res['aggregates'])
    paths['table'] = os.path.join(outdir, 'table.txt')
    with open(paths['table'], 'w') as f:
        f.write(tbl + '\n')
    paths['model'] = os.path.join(outdir, 'model.txt')
    with open(paths['model'], 'w') as f:
        f.write(report.model_table(res['rows']) + '\n')
    paths['csv'] = os.path.join(outdir, 'results.csv')
    report.write_csv(paths['csv'], res['rows'])
    paths['json'] = os.path.join(outdir, 'results.json')
    report.write_json(paths['json'], {
        'date': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
        'command': L.invocation('tools/testbed.py', argv),
        'machine': L.machine(), 'agent_build': L.agent_build(),
        'load_average': os.getloadavg(), 'config': cfg.as_dict(),
        'rows': res['rows'], 'aggregates': res['aggregates'],
        'checks': res['checks'], 'records': res['records'],
        'neighbour_final': res['neighbour_final'], 'flash': res['flash'],
        'commands': res['commands']})
    if plot:
        paths['plots'] = plots.bandwidth(res['records'], cfg,
                                         cfg.cache_sizes, outdir)
        paths['cost_plot'] = plots.cost(res['rows'], outdir)
    return tbl, paths


def print_checks(chk):
    yes = {True: 'holds', False: 'does NOT hold'}
    for size, c in chk['per_size'].items():
        f = c['first_pct']
        print('cache %dM, first window vs none: %s' % (
            int(size) >> 20, ', '.join('%s %+.1f%%' % (k, v)
                                       for k, v in f.items() if k != 'none')))
        if {'firepan', 'firepan_if', 'cachemior'} <= set(f):
            order = (c['order_firepan_if_gt_firepan'] and
                     c['order_firepan_gt_cachemior'] and
                     c['order_cachemior_ge_none_minus_noise'])
            print('  firepan_if > firepan > cachemior >~ none: %s; '
                  'firepan_if >= +16%%: %s'
                  % (yes[order], yes[c['firepan_if_ge_16pct']]))
        if 'hybrid' in f and 'firepan_if' in f:
            print('  hybrid > firepan_if: %s' % yes[c['hybrid_gt_firepan_if']])
        if 'hybrid_worst_second' in c:
            print('  hybrid - none, worst second after the pause: %+.2f '
                  'MB/s at t=%ss (noise, 2 sigma: %.2f MB/s): %s'
                  % (c['hybrid_worst_second_vs_none_mbps'],
                     c['hybrid_worst_second'], c['noise_2sigma_mbps'],
                     yes[c['hybrid_never_below_none']]))
    for st, fit in chk['migration_time_vs_cache'].items():
        print('%s %s vs MiB cached: %.3f s/MiB + %.2f s, r^2 %.3f'
              % (st, fit['what'], fit['s_per_mib'], fit['intercept_s'],
                 fit['r2']))
    if 'hot_list' in chk:
        h = chk['hot_list']
        print('hot list: 8 bytes per cached block in every cachemior run: %s'
              '%s' % (yes[h['exact_8_per_block']],
                      '' if h['r2'] != h['r2'] else
                      ' (fit %.2f bytes/block, r^2 %.3f)'
                      % (h['bytes_per_cached_block'], h['r2'])))


def main(argv):
    args, cfg = parse_args(argv)
    outdir = os.path.abspath(args.outdir)
    os.makedirs(outdir, exist_ok=True)
    print('fcache testbed: VM working set %d MiB (disk %d MiB), caches %s, '
          '%d run(s), strategies %s'
          % (cfg.working_set >> 20, cfg.disk_size >> 20,
             ', '.join('%dM' % (s >> 20) for s in cfg.cache_sizes),
             cfg.runs, ', '.join(cfg.strategies)), flush=True)
    t0 = time.monotonic()
    if args.report_only:
        # Windows are analysis settings: they may be changed afterwards.
        res, cfg = reload(args.report_only, {
            k: getattr(args, k) for k in ('pre_s', 'first_s', 'total_s')
            if getattr(args, k) is not None})
    else:
        res = run(cfg, outdir, args.verbose,
                  log=lambda msg: print(msg, flush=True))
    tbl, paths = write_outputs(res, cfg, outdir, argv, not args.no_plot)
    print()
    print('medians over %d run(s) [min..max]; bandwidth = read MB/s of the '
          'migrated VM; windows from the pause: first %gs, whole %gs'
          % (cfg.runs, cfg.first_s, cfg.total_s))
    print(tbl)
    print()
    print('read MB/s of the migrated VM during the copy, measured and by '
          'the FirepanIF model (nova_ext.contention), per run:')
    print(report.model_table(res['rows']))
    print()
    print_checks(res['checks'])
    print()
    bad = sum(r['vm_mismatches'] + r['vm_errors'] for r in res['rows'])
    print('every VM read was checked: %d mismatching reads or failed '
          'requests in %d runs' % (bad, len(res['rows'])))
    print('table:   %s' % paths['table'])
    print('model:   %s' % paths['model'])
    print('results: %s, %s' % (paths['json'], paths['csv']))
    for p in paths.get('plots', []) + ([paths['cost_plot']]
                                       if 'cost_plot' in paths else []):
        print('plot:    %s' % p)
    print('took %.0f s' % (time.monotonic() - t0))
    return 0


if __name__ == '__main__':
    sys.exit(L.run_main(main, sys.argv[1:], 'testbed'))
