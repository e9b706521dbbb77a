# SPDX-License-Identifier: Apache-2.0
"""Figures of the testbed runs: per-run metrics, medians, tables, files.

Windows are measured from the moment the target VM was paused for the
migration (t = 0), like the paper's "after VM migration": a second the VM
spends paused (firepan's copy) counts with zero bandwidth.  A vmload line
covers the second before it arrived, so a line belongs to the window that
holds the middle of its second.  Bandwidth is the VM's read MB/s (10^6
bytes), the paper's Figure 7 and Tables 1-3 measure; write MB/s and IOPS
are kept in the JSON.
"""

import csv
import json
import math
import statistics

from fcdemo import lab  # noqa: F401  (puts the repository on sys.path)
from nova_ext import contention

BASELINE = 'none'


def window(series, lo, hi, key='read_mbps'):
    vals = [s[key] for s in series if lo <= s['t'] - 0.5 < hi]
    return sum(vals) / len(vals) if vals else float('nan')


def per_second(series, lo, hi, key='read_mbps'):
    """{second: value} for the whole seconds in [lo, hi)."""
    out = {}
    for s in series:
        sec = math.floor(s['t'] - 0.5 + 1e-9)
        if lo <= sec < hi:
            out.setdefault(sec, s[key])
    return out


def _first_k(smp, start, k, bs):
    """Storage reads per 10k VM reads over the first k reads from start."""
    end = next((s for s in smp if s[1] - start[1] >= k), smp[-1])
    reads = end[1] - start[1]
    return (end[2] - start[2]) / bs * 1e4 / reads if reads else float('nan')


def per_read_counts(rec, bs):
    """Storage reads per 10k VM reads, from the destination's samples.

    ``first_k``: over the first K VM reads after the switch, K = the
    blocks the source had cached (what a moved cache could serve);
    ``first_k_attached``: the same from the moment the destination's cache
    serves the VM -- the switch, except for firepan_if, whose VM runs on
    the origin until the copy completes and the cache is attached;
    ``after_copy``: over all the reads after the destination reported the
    migration completed.
    """
    smp = rec.get('dst_samples') or []
    k = rec['src_at_switch']['cached_blocks']
    out = {'first_k': float('nan'), 'first_k_attached': float('nan'),
           'after_copy': float('nan'), 'k': k}
    if not smp:
        return out
    zero = (0.0, 0, 0, None)
    out['first_k'] = _first_k(smp, zero, k, bs)
    done = next((s for s in smp if s[3] == 'completed'), None)
    attached = done if rec.get('resolved') == 'firepan_if' else zero
    if attached is not None:
        out['first_k_attached'] = _first_k(smp, attached, k, bs)
    if done is not None and smp[-1][1] > done[1]:
        out['after_copy'] = ((smp[-1][2] - done[2]) / bs * 1e4 /
                             (smp[-1][1] - done[1]))
    return out


def metrics(rec, cfg):
    """The Table 1-3 quantities of one run."""
    ser = rec['vm_series']
    t_attach = rec['t_attach'] - rec['t_pause']
    t_start = rec['t_start'] - rec['t_pause']
    bs = rec['dst_at_end']['block_size'] or 4096
    vm_reads = rec['vm_final']['reads'] - rec['vm_at_switch']['reads']
    storage_reads = rec['dst_at_end']['origin_read_bytes']
    counts = per_read_counts(rec, bs)
    m = {
        'strategy': rec['strategy'], 'resolved': rec.get('resolved'),
        'cache_size': rec['cache_size'], 'run': rec['run'],
        'nocache_mbps': window(ser, t_start + 1, t_attach),
        'warm_mbps': window(ser, -cfg.pre_s, 0),
        'first_mbps': window(ser, 0, cfg.first_s),
        'whole_mbps': window(ser, 0, cfg.total_s),
        'downtime_ms': rec['downtime_ms'],
        'migration_s': rec['migration_s'],
        'transfer_s': rec['migration'].get('duration_s'),
        'bytes_transferred': rec['migration']['bytes_transferred'],
        'blocks_transferred': rec['migration']['blocks_transferred'],
        'src_cached_blocks': rec['src_at_switch']['cached_blocks'],
        'storage_read_bytes': storage_reads,
        'dst_cache_write_bytes': rec['dst_at_end']['cache_write_bytes'],
        'vm_reads_after_switch': vm_reads,
        'storage_reads_per_10k': (storage_reads / bs * 1e4 / vm_reads
                                  if vm_reads else float('nan')),
        'storage_reads_per_10k_first_k': counts['first_k'],
        'storage_reads_per_10k_first_k_attached':
            counts['first_k_attached'],
        'storage_reads_per_10k_after_copy': counts['after_copy'],
        'vm_mismatches': rec['vm_final']['mismatches'],
        'vm_errors': rec['vm_final']['errors'],
    }
    m.update(during_copy(rec, cfg, m['nocache_mbps']))
    if rec.get('resolved') == 'cachemior':
        # The source reports the hot list it sent as its bytes (8 per
        # block); kept apart so the cost check can fit it.
        m['hot_list_bytes'] = m['bytes_transferred']
    for host, nbs in rec['neighbours'].items():
        before = after = 0.0
        for series in nbs.values():
            before += window(series, -cfg.pre_s, 0, 'read_iops') + \
                window(series, -cfg.pre_s, 0, 'write_iops')
            after += window(series, 0, cfg.first_s, 'read_iops') + \
                window(series, 0, cfg.first_s, 'write_iops')
        m['nb_%s_iops_before' % host] = before
        m['nb_%s_iops_after' % host] = after
        m['nb_%s_change_pct' % host] = (100.0 * (after - before) / before
                                        if before else float('nan'))
    return m


NOT_RECORDED = 'n/a: not recorded'


def copy_hit_ratio(rec):
    """The destination's hit ratio from the switch to "completed".

    From the destination's samples, which carry ``read_hits`` (their 5th
    field) since the contention model was added; None before.
    """
    smp = rec.get('dst_samples') or []
    done = next((s for s in smp if s[3] == 'completed'), None)
    if done is None or len(done) < 5:
        return None
    return done[4] / done[1] if done[1] else None


def during_copy(rec, cfg, nocache_mbps):
    """The VM's read MB/s during the copy, measured and by the model.

    The model is FirepanIF's Eq. 3 (nova_ext.contention) with this run's
    parameters: the storage's rate ``S`` (its rate filter) shared by every
    VM of the testbed (the target and the neighbours of both hosts), the
    VM's rate from the storage alone ``S_k`` (``nocache_mbps``, before it
    had a cache), the VM's rate from the cache ``F_k`` (the testbed's flash
    probe), the destination's hit ratio during the copy (the agent counts
    a read fetched from the source as a hit: the model has no such path)
    and the copy's rate.  The testbed's cache file and storage path have
    no rate limit (``F`` and ``N`` unlimited): the copy has its own link.
    Measured: the VM's read MB/s over the seconds of the copy
    (``window``).
    """
    st = rec.get('resolved') or rec['strategy']
    copy_s = rec['migration'].get('duration_s') or 0.0
    out = {'copy_s': copy_s, 'copy_hit_ratio': None,
           'copy_vm_mbps': window(rec['vm_series'], 0, copy_s),
           'copy_model_mbps': None, 'copy_model_note': ''}
    if st == 'none':
        out['copy_model_note'] = 'no copy'
        return out
    if st == 'firepan':
        out.update(copy_model_mbps=0.0, copy_model_note='VM paused')
        return out
    flash = (rec.get('flash') or {}).get('vm_flash_bps')
    hit = 0.0 if st == 'firepan_if' else copy_hit_ratio(rec)
    out['copy_hit_ratio'] = hit
    missing = [what for what, v in (('H', hit), ('F_k', flash))
               if v is None and not (what == 'F_k' and hit == 0.0)]
    if missing:
        out['copy_model_note'] = '%s (%s)' % (NOT_RECORDED,
                                              ', '.join(missing))
        return out
    sharers = 1 + 2 * cfg.neighbours
    if st == 'cachemior':
        sharers += 1        # its warmer reads the storage too
    copy_bps = (rec['migration']['bytes_transferred'] / copy_s
                if copy_s else 0.0)
    bps = contention.vm_rate(
        hit, flash or 0.0, nocache_mbps * 1e6,
        vms_on_flash=1 + cfg.neighbours,
        storage=cfg.storage_bytes_per_s, vms_on_storage=sharers,
        copy=copy_bps)
    out['copy_model_mbps'] = bps / 1e6
    out['copy_model_note'] = 'H %.2f, S/E %.2f, S_k %.2f%s' % (
        hit, cfg.storage_bytes_per_s / sharers / 1e6, nocache_mbps,
        '' if hit == 0.0 else ', F_k %.2f' % (flash / 1e6))
    return out


def add_pct_over_none(rows):
    """Paired with the baseline of the same size and run."""
    base = {(r['cache_size'], r['run']): r for r in rows
            if r['strategy'] == BASELINE}
    for r in rows:
        b = base.get((r['cache_size'], r['run']))
        for key in ('first_mbps', 'whole_mbps'):
            pct = float('nan')
            if b and b[key]:
                pct = 100.0 * (r[key] - b[key]) / b[key]
            r[key.replace('_mbps', '_pct')] = pct


def _fin(vals):
    return [v for v in vals if v is not None and not (
        isinstance(v, float) and math.isnan(v))]


def summary(vals):
    v = _fin(vals)
    if not v:
        return {'median': float('nan'), 'min': float('nan'),
                'max': float('nan'), 'n': 0}
    return {'median': statistics.median(v), 'min': min(v), 'max': max(v),
            'n': len(v)}


AGG_KEYS = ('first_mbps', 'whole_mbps', 'first_pct', 'whole_pct',
            'warm_mbps', 'nocache_mbps', 'downtime_ms', 'migration_s',
            'storage_read_bytes', 'dst_cache_write_bytes',
            'storage_reads_per_10k', 'storage_reads_per_10k_first_k',
            'storage_reads_per_10k_first_k_attached',
            'storage_reads_per_10k_after_copy', 'bytes_transferred',
            'src_cached_blocks', 'hot_list_bytes',
            'nb_host-a_change_pct', 'nb_host-b_change_pct')


def aggregate(rows, strategies, sizes):
    out = []
    for size in sizes:
        for st in strategies:
            rs = [r for r in rows if r['cache_size'] == size and
                  r['strategy'] == st]
            if not rs:
                continue
            a = {'cache_size': size, 'strategy': st, 'runs': len(rs),
                 'resolved': sorted({r['resolved'] for r in rs})}
            for k in AGG_KEYS:
                a[k] = summary([r.get(k) for r in rs])
            out.append(a)
    return out


def curves(records, cfg, lo=None, hi=None):
    """{(size, strategy): {second: median read MB/s over runs}}."""
    lo = -int(cfg.pre_s + 5) if lo is None else lo
    hi = int(cfg.total_s) if hi is None else hi
    acc = {}
    for rec in records:
        key = (rec['cache_size'], rec['strategy'])
        for sec, v in per_second(rec['vm_series'], lo, hi).items():
            acc.setdefault(key, {}).setdefault(sec, []).append(v)
    return {k: {s: statistics.median(v) for s, v in d.items()}
            for k, d in acc.items()}


def worst_second(curve, base, lo, hi):
    """Lowest (curve - base) over the seconds [lo, hi): (diff, second)."""
    diffs = [(curve[s] - base[s], s) for s in range(lo, hi)
             if s in curve and s in base]
    return min(diffs) if diffs else (float('nan'), None)


def noise(records, cfg, size):
    """2 sigma of the per-second bandwidth of the warm VM (all runs)."""
    vals = []
    for rec in records:
        if rec['cache_size'] == size:
            vals += list(per_second(rec['vm_series'], -int(cfg.pre_s),
                                    0).values())
    return 2 * statistics.pstdev(vals) if len(vals) > 1 else float('nan')


def linear_fit(xs, ys):
    n = len(xs)
    if n < 2:
        return float('nan'), float('nan'), float('nan')
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return float('nan'), float('nan'), float('nan')
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    icpt = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - icpt - slope * x) ** 2 for x, y in zip(xs, ys))
    return slope, icpt, (1 - ss_res / ss_tot) if ss_tot else 1.0


def checks(rows, records, cfg, sizes):
    """The orderings and cost laws the issue asks for, with evidence."""
    out = {'per_size': {}}
    cur = curves(records, cfg)
    med = {}
    for r in aggregate(rows, cfg.strategies, sizes):
        med[(r['cache_size'], r['strategy'])] = r
    for size in sizes:
        def first(st):
            a = med.get((size, st))
            return a['first_pct']['median'] if a else float('nan')
        c = {'first_pct': {st: first(st) for st in cfg.strategies}}
        f = c['first_pct']
        c['order_firepan_if_gt_firepan'] = f.get('firepan_if', 0) > \
            f.get('firepan', 0)
        c['order_firepan_gt_cachemior'] = f.get('firepan', 0) > \
            f.get('cachemior', 0)
        c['order_cachemior_ge_none_minus_noise'] = \
            f.get('cachemior', 0) > -5.0
        c['firepan_if_ge_16pct'] = f.get('firepan_if', 0) >= 16.0
        c['hybrid_gt_firepan_if'] = f.get('hybrid', 0) > \
            f.get('firepan_if', 0)
        if (size, 'hybrid') in cur and (size, BASELINE) in cur:
            diff, sec = worst_second(cur[(size, 'hybrid')],
                                     cur[(size, BASELINE)], 0,
                                     int(cfg.total_s))
            nz = noise(records, cfg, size)
            c.update(hybrid_worst_second_vs_none_mbps=diff,
                     hybrid_worst_second=sec, noise_2sigma_mbps=nz,
                     hybrid_never_below_none=not diff < -nz)
        out['per_size'][size] = c
    # Against the data cached at the switch rather than the nominal size:
    # a read_only cache drops a block on every write to it, so a large one
    # is not full when the VM moves.
    fits = {}
    for st in ('firepan', 'firepan_if', 'hybrid', 'cloudcache'):
        pts = [(r['src_cached_blocks'] * 4096 / 2 ** 20, r['migration_s'],
                r['downtime_ms']) for r in rows if r['strategy'] == st]
        if len({round(p[0]) for p in pts}) >= 2:
            xs = [p[0] for p in pts]
            ys = [p[2] / 1e3 if st == 'firepan' else p[1] for p in pts]
            slope, icpt, r2 = linear_fit(xs, ys)
            fits[st] = {'what': 'downtime_s' if st == 'firepan'
                        else 'migration_s', 's_per_mib': slope,
                        'intercept_s': icpt, 'r2': r2,
                        'points_mib_s': list(zip(xs, ys))}
    out['migration_time_vs_cache'] = fits
    pts = [(r['src_cached_blocks'], r['hot_list_bytes']) for r in rows
           if r.get('hot_list_bytes') is not None]
    if pts:
        slope, icpt, r2 = linear_fit([p[0] for p in pts],
                                     [p[1] for p in pts])
        out['hot_list'] = {
            'bytes_per_cached_block': slope, 'intercept_bytes': icpt,
            'r2': r2, 'exact_8_per_block': all(b == 8 * n for n, b in pts),
            'points': pts}
    return out


def _fmt(a, key, fmt, scale=1.0):
    s = a[key]
    if not s['n']:
        return '-'
    med = fmt % (s['median'] * scale)
    if s['n'] > 1:
        med += ' [%s..%s]' % (fmt % (s['min'] * scale),
                              fmt % (s['max'] * scale))
    return med


def table(aggs):
    """Table 1-3 style text: medians, [min..max] over runs."""
    hdr = ('cache', 'strategy', 'first MB/s', 'first vs none',
           'whole MB/s', 'whole vs none', 'migr. s', 'downtime ms',
           'storage rd MB', 'dst cache wr MB', 'stor.rd/10k',
           'nb src', 'nb dst')
    rows = []
    for a in aggs:
        rows.append((
            '%dM' % (a['cache_size'] >> 20),
            a['strategy'] + ('' if a['resolved'] == [a['strategy']]
                             else '->' + '/'.join(a['resolved'])),
            _fmt(a, 'first_mbps', '%.2f'), _fmt(a, 'first_pct', '%+.1f%%'),
            _fmt(a, 'whole_mbps', '%.2f'), _fmt(a, 'whole_pct', '%+.1f%%'),
            _fmt(a, 'migration_s', '%.1f'), _fmt(a, 'downtime_ms', '%.0f'),
            _fmt(a, 'storage_read_bytes', '%.1f', 1e-6),
            _fmt(a, 'dst_cache_write_bytes', '%.1f', 1e-6),
            _fmt(a, 'storage_reads_per_10k', '%.0f'),
            _fmt(a, 'nb_host-a_change_pct', '%+.0f%%'),
            _fmt(a, 'nb_host-b_change_pct', '%+.0f%%')))
    widths = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
    line = '  '.join('%%-%ds' % w for w in widths)
    out = [line % hdr, '  '.join('-' * w for w in widths)]
    out += [line % r for r in rows]
    return '\n'.join(out)


def model_table(rows):
    """Per run: the VM's read MB/s during the copy, measured and modelled.

    The model's inputs are printed with it, in MB/s: the storage's fair
    share ``S/E``, the VM's rate from the storage alone ``S_k``, from its
    cache ``F_k``; ``H`` the destination's hit ratio during the copy.
    """
    hdr = ('cache', 'strategy', 'run', 'copy s', 'measured MB/s',
           'model MB/s', 'model inputs')
    out = []
    for r in rows:
        def num(key, fmt):
            v = r.get(key)
            return '-' if v is None or v != v else fmt % v
        out.append((
            '%dM' % (r['cache_size'] >> 20),
            r['strategy'] + ('' if r['resolved'] in (None, r['strategy'])
                             else '->' + r['resolved']),
            str(r['run']), num('copy_s', '%.2f'),
            num('copy_vm_mbps', '%.2f'), num('copy_model_mbps', '%.2f'),
            r.get('copy_model_note', '')))
    widths = [max(len(str(x)) for x in col) for col in zip(hdr, *out)]
    line = '  '.join('%%-%ds' % w for w in widths)
    text = [(line % r).rstrip() for r in [hdr] + out]
    text.insert(1, '  '.join('-' * w for w in widths))
    return '\n'.join(text)


CSV_KEYS = ('cache_size', 'strategy', 'resolved', 'run', 'nocache_mbps',
            'warm_mbps', 'first_mbps', 'first_pct', 'whole_mbps',
            'whole_pct', 'downtime_ms', 'migration_s', 'transfer_s',
            'bytes_transferred', 'blocks_transferred', 'src_cached_blocks',
            'hot_list_bytes', 'storage_read_bytes', 'dst_cache_write_bytes',
            'vm_reads_after_switch', 'storage_reads_per_10k',
            'storage_reads_per_10k_first_k',
            'storage_reads_per_10k_first_k_attached',
            'storage_reads_per_10k_after_copy',
            'nb_host-a_iops_before', 'nb_host-a_iops_after',
            'nb_host-a_change_pct', 'nb_host-b_iops_before',
            'nb_host-b_iops_after', 'nb_host-b_change_pct',
            'copy_s', 'copy_hit_ratio', 'copy_vm_mbps', 'copy_model_mbps',
            'copy_model_note', 'vm_mismatches', 'vm_errors')


def write_csv(path, rows):
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, CSV_KEYS, extrasaction='ignore')
        w.writeheader()
        for r in rows:
            w.writerow(r)


def write_json(path, obj):
    def default(o):
        if isinstance(o, float) and math.isnan(o):
            return None
        raise TypeError(repr(o))
    with open(path, 'w') as f:
        json.dump(_clean(obj), f, indent=1, default=default)


def _clean(o):
    # JSON has no NaN: write null, so any parser reads the file.
    if isinstance(o, float) and math.isnan(o):
        return None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o
