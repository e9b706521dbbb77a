# SPDX-License-Identifier: Apache-2.0
"""The fleet simulation's plots (matplotlib, Agg)."""

import os

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after the backend)
import numpy as np  # noqa: E402

from bench.fleet import evacuate  # noqa: E402

COLOURS = {'none': 'tab:red', 'hybrid': 'tab:green',
           'firepan_if': 'tab:blue', 'plan': 'black'}


def _days(n, window_s):
    return np.arange(n) * window_s / 86400.0


def week_plot(result, fleet, path):
    s = result['series']
    x = _days(len(s['variance']['balanced']), fleet.window_s)
    fig, axes = plt.subplots(3, 1, figsize=(9, 8.5), sharex=True)
    ax = axes[0]
    ax.plot(x, s['variance']['static'], color='tab:red', lw=0.8,
            label='without balancer')
    ax.plot(x, s['variance']['balanced'], color='tab:green', lw=0.8,
            label='with balancer')
    ax.set_ylabel('variance of cache\nutilisation across hosts')
    ax.set_yscale('log')
    ax.legend(loc='upper right')
    ax.set_title('%d hosts x %d VMs, %d-s windows'
                 % (fleet.hosts, fleet.vms_per_host, int(fleet.window_s)))
    ax = axes[1]
    for key, ls, what in (('hosts_over_threshold', ':', '> 90 %'),
                          ('hosts_over_capacity', '-', '> 100 %')):
        ax.plot(x, s[key]['static'], color='tab:red', lw=0.8, ls=ls,
                label='without balancer, %s' % what)
        ax.plot(x, s[key]['balanced'], color='tab:green', lw=0.8, ls=ls,
                label='with balancer, %s' % what)
    ax.set_ylabel('hosts whose demand is\nabove 90 % / 100 % of their cache')
    ax.legend(loc='upper right', fontsize=7)
    ax = axes[2]
    per_hour = max(1, int(round(3600.0 / fleet.window_s)))
    moves = np.asarray(s['moves'])
    hours = len(moves) // per_hour
    mh = moves[:hours * per_hour].reshape(hours, per_hour).sum(axis=1)
    ax.bar(np.arange(hours) / 24.0, mh, width=1 / 24.0, align='edge',
           color='tab:green')
    ax.set_ylabel('migrations\nper hour')
    ax.set_xlabel('day')
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def decision_plot(result, path):
    ds = np.sort(np.asarray(result['series']['decision_s']))
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(ds * 1000.0, np.arange(1, len(ds) + 1) / len(ds),
            color='tab:green')
    ax.set_xscale('log')
    ax.set_xlabel('decision time per round, ms (goal < 1000)')
    ax.set_ylabel('fraction of rounds')
    ax.grid(True, which='both', alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def evacuation_plot(ev, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ax = axes[0]
    for mix in evacuate.MIXES:
        r = ev['mixes'][mix]
        ax.plot(r['curve_t'], r['curve_mean_rel'], color=COLOURS[mix],
                lw=2.2 if mix == 'hybrid' else 1.0,
                ls='--' if mix == 'plan' else '-',
                label='plan (%s)' % ', '.join(
                    '%s %d' % kv for kv in sorted(r['strategies'].items()))
                if mix == 'plan' else mix)
    ax.axhline(0.9, color='grey', ls=':', lw=0.8)
    ax.set_xlabel('seconds from the start of the evacuation')
    ax.set_ylabel('mean bandwidth of the 20 VMs\nover before the migration')
    ax.set_ylim(0, 1.05)
    ax.legend(loc='lower right', fontsize=8)
    ax.set_title('%s (%s host)' % (ev['host'], ev['which']))
    ax = axes[1]
    mixes = list(evacuate.MIXES)
    vals = [ev['mixes'][m]['storage_extra_bytes'] / float(1 << 30)
            for m in mixes]
    ax.bar(mixes, vals, color=[COLOURS[m] for m in mixes])
    for i, v in enumerate(vals):
        ax.text(i, v, '%.2f' % v, ha='center', va='bottom', fontsize=8)
    ax.set_ylabel('shared-storage reads over the usual, GiB\n(first %d s)'
                  % int(ev['horizon_s']))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(result, fleet, outdir):
    paths = []
    p = os.path.join(outdir, 'fleet-week.png')
    week_plot(result, fleet, p)
    paths.append(p)
    p = os.path.join(outdir, 'fleet-decision-time.png')
    decision_plot(result, p)
    paths.append(p)
    for ev in result['evacuations']:
        p = os.path.join(outdir, 'fleet-evacuation-%s.png' % ev['which'])
        evacuation_plot(ev, p)
        paths.append(p)
    return paths
