# SPDX-License-Identifier: Apache-2.0
"""Fleet simulation: the balancer's week and one host's evacuation.

Examples::

    .venv/bin/python -m bench.fleet                       # 1,000 x 20, a week
    .venv/bin/python -m bench.fleet --quick               # 50 x 20, a day
    .venv/bin/python -m bench.fleet --json /tmp/fleet.json --plots /tmp/fp

Prints the variance of the hosts' cache utilisation over the week with and
without the balancer, migrations per hour, the balancer's decision time per
round, and the evacuation of one host per strategy mix against the goals of
issue 17 (decision < 1 s, shared-storage reads <= 20 % of all-none, every
VM back within 10 % of its bandwidth in < 60 s).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from bench.fleet import constants as K
from bench.fleet import evacuate
from bench.fleet import sim
from bench.fleet import workload
from nova_ext.balancer import decision
from nova_ext.balancer import evacuation_plan

GIB = float(K.GIB)


def build_parser():
    p = argparse.ArgumentParser(prog='python3 -m bench.fleet',
                                description=__doc__.splitlines()[0])
    p.add_argument('--hosts', type=int, default=1000)
    p.add_argument('--vms-per-host', type=int, default=20)
    p.add_argument('--days', type=float, default=7.0)
    p.add_argument('--window-s', type=float, default=300.0)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--quick', action='store_true',
                   help='50 hosts, 1 day (a smoke run)')
    p.add_argument('--one-move-per-round', action='store_true',
                   help='Balancer.observe (one move per window for the '
                        'whole cloud) instead of observe_many (one per '
                        'over-threshold host)')
    p.add_argument('--max-moves', type=int, default=0,
                   help='observe_many\'s max_moves (the service\'s '
                        'max_moves_per_window, default 1 there); 0: no '
                        'limit, one move per over-threshold host')
    p.add_argument('--threshold', type=float,
                   default=decision.DEFAULT_THRESHOLD)
    p.add_argument('--windows', type=int, default=decision.DEFAULT_WINDOWS)
    p.add_argument('--cooldown-windows', type=int,
                   default=decision.DEFAULT_COOLDOWN_WINDOWS)
    p.add_argument('--peak-utilisation', type=float,
                   default=K.PEAK_UTILISATION,
                   help='sizes the hosts\' caches: the fleet\'s mean '
                        'utilisation at the busiest hour of the first day')
    p.add_argument('--link-gbps', type=float, default=K.LINK_BPS / 1e9,
                   help='migration link, GB/s (default: the cost model\'s)')
    p.add_argument('--origin-mbps', type=float, default=K.ORIGIN_BPS / 1e6,
                   help='shared storage per VM, MB/s')
    p.add_argument('--max-concurrent', type=int,
                   default=evacuation_plan.DEFAULT_MAX_CONCURRENT)
    p.add_argument('--per-destination', type=int,
                   default=evacuation_plan.DEFAULT_PER_DESTINATION)
    p.add_argument('--evacuate-window', type=int, default=None,
                   help='window whose state is evacuated (default: the '
                        'busiest window of the last day)')
    p.add_argument('--dmcache-fraction', type=float, default=0.0,
                   help='share of the VMs whose volume is on the dmcache '
                        'engine (the cost model then takes firepan_if '
                        'where it would take hybrid)')
    p.add_argument('--kappa', type=float, default=K.KAPPA_MISS_OVER_HIT,
                   help='cost of a storage miss over a hit (measured)')
    p.add_argument('--source-fetch', type=float,
                   default=K.SOURCE_FETCH_OVER_HIT,
                   help='cost of a fetch from the source over a hit '
                        '(assumed)')
    p.add_argument('--json', help='write every figure here')
    p.add_argument('--plots', help='write PNG plots into this directory')
    return p


def pct(values, q):
    return float(np.percentile(values, q))


def summarise(week, fleet):
    per_hour = max(1, int(round(3600.0 / fleet.window_s)))
    nw = week['windows']
    hours = nw // per_hour
    moves_h = week['moves'][:hours * per_hour].reshape(hours, per_hour).sum(
        axis=1) if hours else week['moves']
    ds = week['decision_s']
    out = {'capacity_bytes': week['capacity_bytes'],
           'week_elapsed_s': week['elapsed_s'],
           'migrations': week['migrations'],
           'migrations_per_hour': {
               'mean': week['migrations_per_hour_mean'],
               'median': float(np.median(moves_h)),
               'p99': pct(moves_h, 99), 'max': float(moves_h.max())},
           'migrations_per_hour_after_day1': float(
               moves_h[24:].mean()) if len(moves_h) > 24 else None,
           'decision_s': {'median': float(np.median(ds)),
                          'p99': pct(ds, 99), 'max': float(ds.max()),
                          'rounds': int(len(ds))},
           'strategies': week['strategies'],
           'moved_bytes': week['moved_bytes'],
           'downtime_s_total': week['downtime_s_total']}
    for kind in ('balanced', 'static'):
        var = week['variance'][kind]
        out[kind] = {
            'variance_mean': float(var.mean()),
            'variance_median': float(np.median(var)),
            'variance_end': float(var[-1]),
            'variance_max': float(var.max()),
            'max_utilisation_mean': float(
                week['max_utilisation'][kind].mean()),
            'host_windows_over_threshold': int(
                week['hosts_over_threshold'][kind].sum()),
            'host_windows_over_capacity': int(
                week['hosts_over_capacity'][kind].sum()),
        }
    return out


def print_week(s, fleet, args):
    print('fleet: %d hosts x %d VMs, %.1f days of %d-s windows, seed %d; '
          'cache %.0f GiB per host' % (fleet.hosts, fleet.vms_per_host,
                                       args.days, int(fleet.window_s),
                                       args.seed, s['capacity_bytes'] / GIB))
    print('week simulated in %.1f s' % s['week_elapsed_s'])
    print()
    print('cache-load variance (utilisation = demand / capacity, across '
          'hosts)')
    print('  %-18s %10s %10s %10s %10s %14s %14s' % (
        '', 'mean', 'median', 'end', 'max', '>90% host-win', '>100% host-win'))
    for kind, label in (('static', 'without balancer'),
                        ('balanced', 'with balancer')):
        r = s[kind]
        print('  %-18s %10.5f %10.5f %10.5f %10.5f %14d %14d' % (
            label, r['variance_mean'], r['variance_median'],
            r['variance_end'], r['variance_max'],
            r['host_windows_over_threshold'],
            r['host_windows_over_capacity']))
    m = s['migrations_per_hour']
    print('migrations: %d (%.1f per hour; per-hour median %.0f, p99 %.0f, '
          'max %.0f; after the first day %s per hour); strategies %s; '
          '%.1f TiB copied; %.1f s of downtime in all'
          % (s['migrations'], m['mean'], m['median'], m['p99'], m['max'],
             'n/a' if s['migrations_per_hour_after_day1'] is None else
             '%.1f' % s['migrations_per_hour_after_day1'],
             s['strategies'], s['moved_bytes'] / GIB / 1024,
             s['downtime_s_total']))
    d = s['decision_s']
    print('decision time per round: median %.4f s, p99 %.4f s, max %.4f s '
          'over %d rounds (goal < %.0f s: %s)'
          % (d['median'], d['p99'], d['max'], d['rounds'],
             K.GOAL_DECISION_S,
             'holds' if d['max'] < K.GOAL_DECISION_S else 'FAILS'))


def print_evacuation(ev):
    print()
    print('evacuation of %s (%s host by cache load: %.1f GiB of %.0f GiB, '
          'window %d), max_concurrent %d, per_destination %d, link %.2f '
          'GB/s, storage %.0f MB/s per VM, %.0f %% of volumes on dmcache; '
          'reads counted over %.0f s'
          % (ev['host'], ev['which'], ev['load_bytes'] / GIB,
             ev['capacity_bytes'] / GIB, ev['window'], ev['max_concurrent'],
             ev['per_destination'], ev['link_bps'] / 1e9,
             ev['origin_bps'] / 1e6, 100 * ev['dmcache_fraction'],
             ev['horizon_s']))
    print('  %-11s %-22s %12s %9s %12s %12s %12s %12s' % (
        'mix', 'strategies', 'extra rd GiB', 'vs none', 'recovery max',
        'recovery med', 'all back s', 'last switch'))
    for mix in evacuate.MIXES:
        r = ev['mixes'][mix]
        strat = ','.join('%s:%d' % kv
                         for kv in sorted(r['strategies'].items()))
        print('  %-11s %-22s %12.2f %8.1f%% %12.1f %12.1f %12.1f %12.1f' % (
            mix, strat, r['storage_extra_bytes'] / GIB,
            100 * r['storage_vs_none'], r['recovery_s_max'],
            r['recovery_s_median'], r['all_back_s'], r['last_switch_s']))
    print('  (usual shared-storage reads of these VMs over the same time: '
          '%.1f GiB; cached on the host: %.1f GiB)'
          % (ev['mixes']['none']['storage_usual_bytes'] / GIB,
             ev['mixes']['none']['cached_bytes'] / GIB))
    for mix in evacuate.MIXES:
        r = ev['mixes'][mix]
        ok_rd = r['storage_vs_none'] <= K.GOAL_STORAGE_VS_NONE
        ok_rec = r['recovery_s_max'] < K.GOAL_RECOVERY_S
        print('  goals, %-10s reads <= %.0f %% of none: %s; every VM back '
              'within %.0f %% in < %.0f s of its switchover: %s'
              % (mix, 100 * K.GOAL_STORAGE_VS_NONE,
                 'baseline' if mix == 'none' else
                 'holds' if ok_rd else 'FAILS',
                 100 * K.RECOVERED_WITHIN, K.GOAL_RECOVERY_S,
                 'holds' if ok_rec else 'FAILS'))


def jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return float('%.6g' % v) if np.isfinite(v) else None
    return obj


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.quick:
        args.hosts, args.days = 50, 1.0
    K.KAPPA_MISS_OVER_HIT = args.kappa
    K.SOURCE_FETCH_OVER_HIT = args.source_fetch
    t0 = time.monotonic()
    fleet = workload.Fleet(args.hosts, args.vms_per_host, args.days,
                           args.window_s, args.seed)
    link = args.link_gbps * 1e9
    origin = args.origin_mbps * 1e6
    capacity = sim.capacity_for(fleet, args.peak_utilisation)
    if args.evacuate_window is None:
        per_day = int(round(86400.0 / args.window_s))
        first = max(0, fleet.windows - per_day)
        totals = [fleet.demand_bytes(w).sum()
                  for w in range(first, fleet.windows)]
        args.evacuate_window = first + int(np.argmax(totals))
    week = sim.run_week(
        fleet, capacity=capacity,
        one_move_per_round=args.one_move_per_round,
        max_moves=args.max_moves or None,
        threshold=args.threshold, windows=args.windows,
        cooldown_windows=args.cooldown_windows, link_bps=link,
        origin_bps=origin, snapshot_window=args.evacuate_window)
    summary = summarise(week, fleet)
    print_week(summary, fleet, args)
    snap = week['snapshot']
    evs = evacuate.run(fleet, snap['host_of'], snap['demand'], capacity,
                       snap['window'], which=('median', 'heaviest'),
                       max_concurrent=args.max_concurrent,
                       per_destination=args.per_destination,
                       link_bps=link, origin_bps=origin,
                       dmcache_fraction=args.dmcache_fraction,
                       seed=args.seed)
    for ev in evs:
        print_evacuation(ev)
    elapsed = time.monotonic() - t0
    print()
    print('total run time %.1f s' % elapsed)
    result = {'command': 'python3 -m bench.fleet ' + ' '.join(
        sys.argv[1:] if argv is None else argv),
        'args': vars(args), 'elapsed_s': elapsed, 'week': summary,
        'series': {'variance': week['variance'],
                   'max_utilisation': week['max_utilisation'],
                   'hosts_over_threshold': week['hosts_over_threshold'],
                   'hosts_over_capacity': week['hosts_over_capacity'],
                   'moves': week['moves'],
                   'decision_s': week['decision_s']},
        'first_decisions': week['first_decisions'],
        'evacuations': evs}
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(jsonable(result), f, indent=1, sort_keys=True)
    if args.plots:
        from bench.fleet import plots
        os.makedirs(args.plots, exist_ok=True)
        for path in plots.write_all(result, fleet, args.plots):
            print('plot %s' % path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
