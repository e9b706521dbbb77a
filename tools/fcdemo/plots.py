# SPDX-License-Identifier: Apache-2.0
"""PNG plots of the testbed (matplotlib, Agg): Figures 6/7/10 and costs."""

import os

from fcdemo import report

COLORS = {'none': '#7f7f7f', 'cachemior': '#ff7f0e', 'firepan': '#1f77b4',
          'firepan_if': '#2ca02c', 'cloudcache': '#9467bd',
          'hybrid': '#d62728', 'auto': '#8c564b'}


def _plt():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def bandwidth(records, cfg, sizes, outdir):
    """One PNG per cache size, like Figures 7 and 10.

    Per-second read MB/s around the migration, one line per strategy
    (median of the runs).
    """
    plt = _plt()
    cur = report.curves(records, cfg)
    paths = []
    for size in sizes:
        fig, ax = plt.subplots(figsize=(10, 5.5))
        for st in cfg.strategies:
            c = cur.get((size, st))
            if not c:
                continue
            xs = sorted(c)
            ax.plot([x + 0.5 for x in xs], [c[x] for x in xs],
                    color=COLORS.get(st), lw=2 if st in (
                        'hybrid', 'firepan_if', 'none') else 1.3,
                    label=st)
        ax.axvline(0, color='k', lw=0.8)
        ax.axvspan(0, cfg.first_s, color='#f2f2f2', zorder=0)
        ax.text(0.2, 0.02, 'first window', transform=ax.get_xaxis_transform(),
                fontsize=8)
        ax.set_xlabel('seconds since the VM was paused for migration')
        ax.set_ylabel('read MB/s of the migrated VM (median of %d run%s)'
                      % (cfg.runs, '' if cfg.runs == 1 else 's'))
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc='lower right')
        ax.set_title('cache %d MiB, working set %d MiB, storage %s bit/s, '
                     'link %g MB/s, %d neighbour(s) per host'
                     % (size >> 20, cfg.working_set >> 20, cfg.storage_rate,
                        cfg.link_mbps, cfg.neighbours), fontsize=10)
        fig.tight_layout()
        path = os.path.join(outdir, 'bandwidth-%dM.png' % (size >> 20))
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def cost(rows, outdir):
    """Migration time against cache size; hot list bytes against blocks."""
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for st in ('firepan', 'firepan_if', 'cloudcache', 'hybrid'):
        pts = [(r['src_cached_blocks'] * 4096 / 2 ** 20,
                r['downtime_ms'] / 1e3
                if st == 'firepan' else r['migration_s'])
               for r in rows if r['strategy'] == st]
        if pts:
            ax1.plot([p[0] for p in pts], [p[1] for p in pts], 'o',
                     color=COLORS[st], label=st + (
                         ' (downtime)' if st == 'firepan' else ''))
    ax1.set_xlabel('MiB cached on the source at the switch')
    ax1.set_ylabel('migration time, s (prepare to completed)')
    ax1.set_ylim(bottom=0)
    ax1.legend(fontsize=8)
    pts = [(r['src_cached_blocks'], r['hot_list_bytes']) for r in rows
           if r.get('hot_list_bytes') is not None]
    if pts:
        ax2.plot([p[0] for p in pts], [p[1] / 1024 for p in pts], 'o',
                 color=COLORS['cachemior'])
    ax2.set_xlabel('cached blocks on the source at the switch')
    ax2.set_ylabel('cachemior hot list sent, KiB')
    ax2.set_ylim(bottom=0)
    fig.tight_layout()
    path = os.path.join(outdir, 'cost.png')
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
