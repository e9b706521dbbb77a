# SPDX-License-Identifier: Apache-2.0
"""Check the fleet's RWSS_1 formula against the trace generator's streams.

Runs the generator's ``mix`` shape (:func:`bench.traces.shapes.stream`,
the very requests ``python3 -m bench.traces.generate --shape mix`` writes)
at a small scale, counts each volume's exact RWSS_1 (distinct blocks
accessed at least twice) and WSS per window, and compares the RWSS_1 with
the expectation :class:`bench.fleet.workload.RankBins` computes from the
same parameters.  Two backup scans per run show that the scans raise the
WSS and not the RWSS_1.

    .venv/bin/python -m bench.fleet.calibrate [--hot-blocks 4096] [--seed 1]
"""

import argparse
import sys

import numpy as np

from bench.fleet import workload
from bench.traces import shapes

WINDOW_S = 3600.0


def observed(profiles, seed, windows):
    """Per volume and window: (RWSS_1, WSS, requests)."""
    nvol = len(profiles)
    out = np.zeros((nvol, windows, 3))
    per = [[[] for _ in range(windows)] for _ in range(nvol)]
    for chunk in shapes.stream(profiles, seed):
        w = np.minimum((chunk['t'] // WINDOW_S).astype(np.int64),
                       windows - 1)
        for v in range(nvol):
            for k in range(windows):
                sel = (chunk['vol'] == v) & (w == k)
                if not sel.any():
                    continue
                c = chunk[sel]
                # Expand multi-block requests (the scans) to blocks.
                reps = c['nblk'].astype(np.int64)
                starts = np.repeat(c['block'], reps)
                offs = np.arange(reps.sum()) - np.repeat(
                    np.cumsum(reps) - reps, reps)
                per[v][k].append(starts + offs)
                out[v, k, 2] += len(c)
    for v in range(nvol):
        for k in range(windows):
            if not per[v][k]:
                continue
            blocks = np.concatenate(per[v][k])
            _, counts = np.unique(blocks, return_counts=True)
            out[v, k, 0] = (counts >= 2).sum()
            out[v, k, 1] = len(counts)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog='python3 -m bench.fleet.calibrate',
                                description=__doc__.splitlines()[0])
    p.add_argument('--hot-blocks', type=int, default=4096)
    p.add_argument('--volume-blocks', type=int, default=1 << 17)
    p.add_argument('--windows', type=int, default=8)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--intensities', default='0.3,1,3',
                   help='requests per hot block per window of the web '
                        'volume')
    args = p.parse_args(argv)
    h = args.hot_blocks
    duration = args.windows * WINDOW_S
    print('mix shape, hot %d blocks, volume %d blocks, %d windows of %d s, '
          'seed %d; drift over 2 days; a scan of 1/4 of the volume every '
          '4 h, lasting 1 h' % (h, args.volume_blocks, args.windows,
                                WINDOW_S, args.seed))
    print('%-6s %6s %10s %12s %12s %8s %10s' % (
        'volume', 'n/H', 'expected', 'observed', 'sd', 'error',
        'WSS scan/no'))
    worst = 0.0
    for rho in [float(x) for x in args.intensities.split(',')]:
        requests = int(rho * h * args.windows / 0.4)
        profs = shapes.profiles_for(
            'mix', requests, duration, volume_blocks=args.volume_blocks,
            hot_blocks=h, drift_period=2 * shapes.DAY,
            scan_period=4 * 3600.0, scan_offset=2 * 3600.0,
            scan_seconds=3600.0)
        obs = observed(profs, args.seed, args.windows)
        scan_windows = [2, 6]
        for v, pr in enumerate(profs):
            n = pr.requests * WINDOW_S / duration
            rb = workload.RankBins(pr.hot_blocks, pr.volume_blocks,
                                   pr.zipf_alpha, pr.cold_fraction)
            exp = float(rb.rwss(np.array([n]))[0])
            rw = obs[v, :, 0]
            others = [k for k in range(args.windows)
                      if k not in scan_windows]
            expected = np.full(args.windows, exp)
            if pr.scan_period > 0:
                # Each scan window holds one whole scan.
                expected[scan_windows] += workload.scan_extra(
                    n, pr.volume_blocks, pr.cold_fraction, pr.scan_blocks)
            err = (rw.mean() - expected.mean()) / expected.mean()
            worst = max(worst, abs(err))
            wss = obs[v, :, 1]
            scan_ratio = (wss[scan_windows].mean() / wss[others].mean()
                          if pr.scan_period > 0 else float('nan'))
            print('%-6s %6.2f %10.1f %12.1f %12.1f %+7.1f%% %10.2f' % (
                pr.name, n / pr.hot_blocks, expected.mean(), rw.mean(),
                rw.std(),
                100 * err, scan_ratio))
            if pr.scan_period > 0:
                print('%-6s %6s RWSS_1 in scan windows %.1f (expected '
                      '%.1f), others %.1f (expected %.1f)'
                      % ('', '', rw[scan_windows].mean(),
                         expected[scan_windows].mean(), rw[others].mean(),
                         exp))
    print('largest error of the mean: %.1f %%' % (100 * worst))
    return 0


if __name__ == '__main__':
    sys.exit(main())
