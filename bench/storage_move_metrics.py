# SPDX-License-Identifier: Apache-2.0
"""The storage-move benchmark's arithmetic: media, workloads, verdicts.

Everything bench/storage_move.py computes from what it measured, and the
set-up it fixes before measuring, as pure functions (no I/O), so that
tests/unit/test_storage_move_metrics.py can check them against figures
worked out by hand.  The paper is Zhou et al., "Optimizing virtual machine
live storage migration in heterogeneous storage environment" (VEE '13;
/work/shared/seeds/live-storage-migration-heterogeneous.txt).
"""

import collections
import math

from nova_ext import movecost

KiB = 1024
MiB = 1024 * 1024

# The weights of §7.4 (10 %, 50 %, 80 %): the cells of the verdicts.  The
# figures draw MC over the whole range.
GAMMAS = (0.1, 0.5, 0.8)
PLOT_GAMMAS = tuple(i / 10.0 for i in range(11))

# -- the media, fixed before the run --------------------------------------

# Table 1: 5 GB copied SSD to SSD in 30 s, with an HDD on one side in 55
# to 59 s: streaming bandwidth SSD/HDD = 180/95 (movecost's defaults).
PAPER_BANDWIDTH_RATIO = (movecost.DEFAULT_BANDWIDTH_BPS['ssd'] /
                         movecost.DEFAULT_BANDWIDTH_BPS['hdd'])
# Table 2, 50 % reads: 5900 against 1744 I/O per second (movecost's
# DEFAULT_IOPS, which ``auto`` reasons with).
PAPER_IOPS_RATIO = movecost.DEFAULT_IOPS['ssd'] / movecost.DEFAULT_IOPS['hdd']

Medium = collections.namedtuple('Medium', 'name mbps delay_ms iops')


def emulated_media(hdd_mbps, hdd_delay_ms):
    """The two emulated media, from the HDD's figures and the paper's ratios.

    Each medium serves one request at a time (nbdkit's ``noparallel``), a
    request taking a fixed delay plus its bytes at the streaming rate, so
    a 4 KiB request takes ``delay + 4 KiB / rate`` whatever the workload's
    queue depth.  The SSD gets ``PAPER_BANDWIDTH_RATIO`` times the HDD's
    rate and the delay that gives it ``PAPER_IOPS_RATIO`` times the HDD's
    4 KiB IOPS, rounded to a whole millisecond (nbdkit's delay filter
    takes nothing finer; ``iops`` gives the ratio that results).  The
    media are fixed from the paper before the run, not tuned to a result.
    :raises ValueError: a figure is not positive, or the SSD's delay
        rounds to nothing (make the HDD's longer).
    """
    if hdd_mbps <= 0 or hdd_delay_ms <= 0 or hdd_delay_ms != int(
            hdd_delay_ms):
        raise ValueError('the HDD needs a positive rate and a whole, '
                         'positive number of milliseconds of delay')
    ssd_mbps = hdd_mbps * PAPER_BANDWIDTH_RATIO
    hdd_s = hdd_delay_ms / 1e3 + 4 * KiB / (hdd_mbps * 1e6)
    ssd_delay_ms = round((hdd_s / PAPER_IOPS_RATIO -
                          4 * KiB / (ssd_mbps * 1e6)) * 1e3)
    if ssd_delay_ms < 1:
        raise ValueError('an HDD delay of %g ms leaves the SSD none: the '
                         'ratio %.2f needs a longer one'
                         % (hdd_delay_ms, PAPER_IOPS_RATIO))
    out = {}
    for name, mbps, delay in (('hdd', float(hdd_mbps), int(hdd_delay_ms)),
                              ('ssd', ssd_mbps, int(ssd_delay_ms))):
        iops = 1.0 / (delay / 1e3 + 4 * KiB / (mbps * 1e6))
        out[name] = Medium(name, mbps, delay, iops)
    return out


def copy_floor_s(size, media, src, dst):
    """Seconds the slower medium needs to pass ``size`` bytes once."""
    return size / (min(media[src].mbps, media[dst].mbps) * 1e6)


# -- the workloads: Table 7 -----------------------------------------------

Profile = collections.namedtuple('Profile',
                                 'name read_share block_size depth pattern')

# Table 7's block-level benchmarks.  IOmeter is "configured as 75 % reads
# and 25 % writes" with OIO 4 and 16; its block size is not given: 4 KiB,
# the size of the SSD figures of Table 4, at random offsets.  IOzone's
# read and write file tests stream a file: 100 % sequential reads or
# writes, in 64 KiB requests (the paper gives no record size), one stream.
# Dbench and the kernel compilation are file-system and CPU workloads
# whose block-level mix the paper does not give; they are not emulated.
PROFILES = collections.OrderedDict((p.name, p) for p in (
    Profile('IOM_4', 0.75, 4 * KiB, 4, 'random'),
    Profile('IOM_16', 0.75, 4 * KiB, 16, 'random'),
    Profile('IOZ_R', 1.0, 64 * KiB, 1, 'sequential'),
    Profile('IOZ_W', 0.0, 64 * KiB, 1, 'sequential'),
))
NOT_EMULATED = ('Db_2', 'Db_16', 'KC_10', 'KC_20')


# -- the figures: §4 ------------------------------------------------------

def lambda_time(move_s, plain_copy_s):
    """Equation (2): move time over the time of a plain copy of the image.

    ``None`` (a move that did not finish) gives ``inf``.
    """
    if move_s is None:
        return math.inf
    if plain_copy_s <= 0:
        raise ValueError('plain copy time %r must be positive'
                         % (plain_copy_s,))
    return move_s / plain_copy_s


def lambda_io(during_bps, best_bps):
    """Equation (1): the share of the best I/O performance lost in the move.

    ``best_bps`` is the workload's throughput with no move on the faster
    of the two media, ``during_bps`` its throughput during the move.
    """
    if best_bps <= 0:
        raise ValueError('best throughput %r must be positive' % (best_bps,))
    return max(0.0, (best_bps - during_bps) / best_bps)


def ssd_workload_writes(src, dst, a_write_bytes, b_write_bytes, size):
    """Bytes of the workload's that reached an SSD (Table 6's accounting).

    Every write to an SSD source, and the writes to an SSD destination
    beyond one copy of the image: the copy is the same for every scheme,
    and LR's blocks skipped by the copy because the VM wrote them count
    as copy, as §7.2 counts them.
    """
    out = 0
    if src == 'ssd':
        out += a_write_bytes
    if dst == 'ssd':
        out += max(0, b_write_bytes - size)
    return out


def lambda_wear(ssd_bytes, workload_write_bytes):
    """Equation (3): SSD writes per workload write (the same time unit)."""
    if workload_write_bytes <= 0:
        return 0.0
    return ssd_bytes / float(workload_write_bytes)


def migration_cost(l_time, l_io, l_wear, gamma):
    """Equation (4), as ``auto`` computes it (movecost.migration_cost)."""
    return movecost.migration_cost(l_time, l_io, l_wear, gamma)


def cell_figures(move_s, plain_copy_s, during_bps, best_bps, src, dst,
                 a_write_bytes, b_write_bytes, size, write_bytes,
                 gammas=GAMMAS):
    """The lambdas and MC of one move; ``move_s`` None: did not finish.

    A move that did not finish has lambda_time and MC ``inf`` and, as it
    never handed the VM to B, no I/O figure of its own: lambda_io 1.
    """
    done = move_s is not None
    out = {'lambda_time': lambda_time(move_s, plain_copy_s),
           'lambda_io': lambda_io(during_bps, best_bps) if done else 1.0,
           'lambda_wear': lambda_wear(
               ssd_workload_writes(src, dst, a_write_bytes, b_write_bytes,
                                   size), write_bytes)}
    for g in gammas:
        out['mc_%g' % g] = migration_cost(out['lambda_time'],
                                          out['lambda_io'],
                                          out['lambda_wear'], g)
    return out


def median(xs):
    """Median of the numbers in ``xs`` (None left out); None if none."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    if n % 2:
        return xs[n // 2]
    lo, hi = xs[n // 2 - 1], xs[n // 2]
    if math.isinf(lo) or math.isinf(hi):
        return hi if lo == hi else math.inf
    return (lo + hi) / 2.0


# -- item 4: auto against the best measured scheme ------------------------

def _same(x, y):
    if x is None or y is None:
        return False
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y))


def auto_verdict(auto, measured_mc, qemu_mc=None):
    """Is ``auto``'s scheme the measured best of the paper's five?

    :param auto: the scheme movecost.choose_scheme picked.
    :param measured_mc: ``{scheme: MC}`` measured in this cell (``inf``
        for a move that did not finish, None for no measurement).
    :param qemu_mc: ``{mode: MC}`` of QEMU's modes, for reference.
    :returns: ``{'auto', 'auto_mc', 'best', 'best_mc', 'agree',
        'excess', 'below_qemu', 'verdict'}``; ``best`` lists every scheme
        at the lowest MC (ties count for ``auto``), ``excess`` is how much
        higher auto's MC is than the best's (0 when they agree, ``inf``
        if auto's move did not finish or the best's MC is 0), verdict
        ``agree`` or ``FAIL``.
    """
    finite = dict((s, v) for s, v in measured_mc.items() if v is not None)
    out = {'auto': auto, 'auto_mc': measured_mc.get(auto), 'best': [],
           'best_mc': None, 'agree': False, 'excess': None,
           'below_qemu': None, 'verdict': 'FAIL'}
    if finite:
        low = min(finite.values())
        out['best_mc'] = low
        out['best'] = sorted(s for s, v in finite.items() if _same(v, low))
        mine = out['auto_mc']
        out['agree'] = auto in out['best']
        if out['agree']:
            out['excess'] = 0.0
        elif mine is None or math.isinf(mine) or low == 0:
            out['excess'] = math.inf
        else:
            out['excess'] = mine / low - 1
    if out['agree']:
        out['verdict'] = 'agree'
    q = [v for v in (qemu_mc or {}).values() if v is not None]
    if q and out['auto_mc'] is not None:
        out['below_qemu'] = all(out['auto_mc'] < v for v in q)
    return out


# -- item 5: mixing schemes (§7.4) ----------------------------------------

# §7.4 and the abstract: mixing cut the massive migration's MC by up to
# 48 % against the best single scheme.
PAPER_MIX_CUT = 0.48
MIX_SCHEMES = ('lr', 'slr', 'aio')


def batch_directions(volumes, eps):
    """The directions of ``volumes`` moves, the §7.4 way.

    ``eps`` of them SSD to SSD and as many HDD to HDD, the rest half SSD
    to HDD and half HDD to SSD; rounded to whole volumes, the same-media
    pairs first.
    :raises ValueError: eps is not from 0 to 0.5 or volumes is odd.
    """
    if not 0 <= eps <= 0.5:
        raise ValueError('epsilon %r must be from 0 to 0.5' % (eps,))
    if volumes <= 0 or volumes % 2:
        raise ValueError('the batch needs an even number of volumes, '
                         'not %r' % (volumes,))
    same = int(round(eps * volumes))
    cross = (volumes - 2 * same) // 2
    return ([('ssd', 'ssd')] * same + [('hdd', 'hdd')] * same +
            [('ssd', 'hdd')] * cross + [('hdd', 'ssd')] * cross)


def batch_mc(volume_mcs):
    """§7.4: a massive migration's MC is the sum of its moves'."""
    return math.fsum(volume_mcs)


def mixing_verdict(single_total, mix_total):
    """Mix against each single scheme for one (epsilon, gamma).

    :param single_total: ``{scheme: batch MC}`` measured with every
        volume moved by that scheme.
    :param mix_total: the batch MC measured with the planner's mix.
    :returns: ``{'best_single', 'best_single_mc', 'mix_mc', 'cut',
        'never_worse'}`` where ``cut`` = 1 - mix / best single (negative:
        the mix cost more; None if the best single's MC is 0 or inf).
    """
    best = min(single_total, key=lambda s: single_total[s])
    low = single_total[best]
    cut = None
    if low > 0 and not math.isinf(low) and not math.isinf(mix_total):
        cut = 1 - mix_total / low
    return {'best_single': best, 'best_single_mc': low, 'mix_mc': mix_total,
            'cut': cut, 'never_worse': mix_total <= low or _same(mix_total,
                                                                 low)}


def mixing_claims(rows):
    """The paper's two mixing claims against the measured rows.

    ``rows`` are :func:`mixing_verdict` results.  Claim 1 (Figure 15):
    the mix is never worse than the best single scheme.  Claim 2 (the
    abstract, §7.4): it is lower by up to 48 %; it holds if the largest
    cut measured reaches 48 %.
    """
    cuts = [r['cut'] for r in rows if r['cut'] is not None]
    best_cut = max(cuts) if cuts else None
    return {'never_worse': all(r['never_worse'] for r in rows) and
            bool(rows),
            'largest_cut': best_cut,
            'cut_48': best_cut is not None and best_cut >= PAPER_MIX_CUT}


# -- the paper's findings, for the cell-by-cell table ---------------------

# Per direction (§7.3), the scheme(s) the paper finds best "on average"
# over its benchmarks: the shortest move, the least I/O penalty and the
# lowest MC at each gamma of GAMMAS.  DBT is left out where the paper
# leaves it out (SSD to HDD, HDD to HDD: it fails or takes too long).
PAPER_BEST = {
    'hdd->ssd': {'lambda_time': ('lr',), 'lambda_io': ('lr',),
                 'mc_0.1': ('lr',), 'mc_0.5': ('lr',), 'mc_0.8': ('lr',)},
    'ssd->hdd': {'lambda_time': ('slr',), 'lambda_io': ('aio',),
                 'mc_0.1': ('aio',), 'mc_0.5': ('slr',), 'mc_0.8': ('lr',)},
    'ssd->ssd': {'lambda_time': ('slr', 'aio'), 'lambda_io': ('dbt',),
                 'mc_0.1': ('lr', 'slr'), 'mc_0.5': ('lr',),
                 'mc_0.8': ('lr',)},
    'hdd->hdd': {'lambda_time': ('lr',), 'lambda_io': ('slr',),
                 'mc_0.1': ('slr',), 'mc_0.5': ('slr',), 'mc_0.8': ('slr',)},
}
PAPER_EXCLUDES = {'ssd->hdd': ('dbt',), 'hdd->hdd': ('dbt',)}
# Table 5, downtime in ms (kernel compilation).
PAPER_DOWNTIME_MS = {
    'ssd->ssd': {'dbt': 232, 'mirror': 198, 'lr': 197, 'slr': 120,
                 'aio': 124},
    'hdd->ssd': {'dbt': 266, 'mirror': 249, 'lr': 197, 'slr': 140,
                 'aio': 200},
    'ssd->hdd': {'dbt': 4000, 'mirror': 298, 'lr': 200, 'slr': 150,
                 'aio': 201},
    'hdd->hdd': {'dbt': 900, 'mirror': 199, 'lr': 246, 'slr': 179,
                 'aio': 260},
}


def measured_best(values, excluded=()):
    """The scheme(s) with the lowest figure; ``values`` {scheme: x}."""
    xs = dict((s, v) for s, v in values.items()
              if v is not None and s not in excluded)
    if not xs:
        return ()
    low = min(xs.values())
    return tuple(sorted(s for s, v in xs.items() if _same(v, low)))


def against_paper(direction, figure, values):
    """One cell of the table against the paper.

    It agrees if a scheme with the lowest figure (``values`` {scheme: x},
    the mean over the workloads) is one the paper names.
    """
    paper = PAPER_BEST[direction][figure]
    best = measured_best(values, PAPER_EXCLUDES.get(direction, ()))
    return {'paper': paper, 'measured': best,
            'agree': bool(set(best) & set(paper))}


def mean(xs):
    """Mean of ``xs`` (None left out; any inf gives inf); None if none."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    if any(math.isinf(x) for x in xs):
        return math.inf
    return math.fsum(xs) / len(xs)
