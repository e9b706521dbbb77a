# SPDX-License-Identifier: Apache-2.0
"""Generate a synthetic block trace (CloudCache section 4 workload shapes).

Examples::

    python3 -m bench.traces.generate --shape scan --requests 1000000 \\
        --out /tmp/scan.csv --format csv --seed 1
    python3 -m bench.traces.generate --shape mix --days 21 \\
        --out /tmp/mix.bin --format oracle --seed 7

Shapes: ``zipf`` (zipf-like reuse over a fixed hot set, plus one-off reads
over the whole volume), ``drift`` (the same with a hot set that slides by
its whole size every --drift-days), ``scan`` (zipf plus a backup scan,
a sequential read of --scan-blocks blocks, once per --scan-period-days),
``mix`` (four volumes: ``web`` with the weekly scan, a small skewed ``db``,
a drifting ``drift`` and a ``light`` VM of mostly one-off reads, with 40,
30, 20 and 10 % of the requests).  Times are seconds of trace time, the
same for a given seed whatever the machine.  Prints a JSON summary.
"""

import argparse
import json
import sys
import time

from bench.traces import formats
from bench.traces import shapes


def build_parser():
    p = argparse.ArgumentParser(
        prog='python3 -m bench.traces.generate',
        description=__doc__.splitlines()[0])
    p.add_argument('--shape', choices=shapes.SHAPES, required=True)
    p.add_argument('--out', required=True, help='output file')
    p.add_argument('--format', choices=('csv', 'oracle'), default='csv')
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--requests', type=int, default=1000000,
                   help='foreground requests over all volumes (scans come '
                        'on top)')
    p.add_argument('--days', type=float, default=21.0,
                   help='trace duration in days of trace time')
    p.add_argument('--block-size', type=int, default=4096)
    p.add_argument('--volume-blocks', type=int, default=1 << 20)
    p.add_argument('--hot-blocks', type=int, default=1 << 15)
    p.add_argument('--zipf-alpha', type=float, default=0.9)
    p.add_argument('--cold-fraction', type=float, default=0.2,
                   help='share of requests to a uniformly random block')
    p.add_argument('--write-fraction', type=float, default=0.3)
    p.add_argument('--req-blocks', type=float, default=1.0,
                   help='mean foreground request length in blocks')
    p.add_argument('--drift-days', type=float, default=None,
                   help='days for the hot set to slide by its size '
                        '(default: a quarter of the trace)')
    p.add_argument('--scan-period-days', type=float, default=7.0)
    p.add_argument('--scan-offset-days', type=float, default=None,
                   help='time of the first scan (default: 3/4 of a period)')
    p.add_argument('--scan-blocks', type=int, default=None,
                   help='blocks read by each scan (default: a quarter of '
                        'the volume)')
    p.add_argument('--scan-req-blocks', type=int, default=32)
    p.add_argument('--scan-hours', type=float, default=2.0,
                   help='how long one scan lasts')
    return p


def profiles_from_args(args):
    day = shapes.DAY
    return shapes.profiles_for(
        args.shape, args.requests, args.days * day,
        volume_blocks=args.volume_blocks, hot_blocks=args.hot_blocks,
        zipf_alpha=args.zipf_alpha, cold_fraction=args.cold_fraction,
        write_fraction=args.write_fraction, req_blocks=args.req_blocks,
        drift_period=(None if args.drift_days is None
                      else args.drift_days * day),
        scan_period=args.scan_period_days * day,
        scan_offset=(None if args.scan_offset_days is None
                     else args.scan_offset_days * day),
        scan_blocks=args.scan_blocks, scan_req_blocks=args.scan_req_blocks,
        scan_seconds=args.scan_hours * 3600.0)


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        profiles = profiles_from_args(args)
    except ValueError as e:
        sys.stderr.write('generate: %s\n' % e)
        return 2
    t0 = time.monotonic()
    counts = formats.write_trace(args.out, args.format, profiles, args.seed,
                                 block_size=args.block_size)
    summary = dict(counts, shape=args.shape, format=args.format,
                   seed=args.seed, out=args.out,
                   volumes=[p.name for p in profiles],
                   duration_s=args.days * shapes.DAY,
                   scans=sum(len(p.scan_times()) for p in profiles),
                   elapsed_s=round(time.monotonic() - t0, 3))
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
