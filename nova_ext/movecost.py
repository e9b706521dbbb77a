# SPDX-License-Identifier: Apache-2.0
"""The cost of moving a volume between media, and choosing how (``auto``).

A live storage move copies the volume from origin A (the source) to origin
B (the destination) while the VM keeps using it.  Five schemes differ in
where the VM's reads and writes go meanwhile (Zhou et al., "Optimizing
virtual machine live storage migration in heterogeneous storage
environment", §2 and §5; the seed text is
/work/shared/seeds/live-storage-migration-heterogeneous.txt):

``dbt``     reads and writes on A; the blocks written behind the copy are
            copied again in rounds (dirty block tracking) until the dirty
            set stops shrinking, then the VM is paused while the rest is
            copied, however long that takes.
``mirror``  reads on A; a write to the copied region goes to A and B at
            once and completes when both have it (synchronous I/O
            mirroring).
``lr``      low redundancy: every write goes to B; reads of blocks not yet
            copied (and not written) come from A; the copy skips blocks
            the VM wrote.
``slr``     source-based LR: I/O to the to-be-copied region stays on A,
            writes to the copied region go to B.
``aio``     asynchronous mirroring: like ``mirror`` but a write completes
            when the faster medium has it; the slower one is throttled
            behind a bound of pending writes; reads of the copied region
            come from the faster medium too.

and fcache's own, which the paper does not have and ``auto`` does not
choose (:data:`FCACHE_SCHEMES`):

``dbt_capped`` DBT whose pause is capped (the agent's ``downtime_ms``):
            the rounds go on until what is left fits the pause, and the
            move fails, the VM staying on A, when they do not converge.

The metric (§4 of the paper)::

    lambda_io   = (best I/O performance - I/O performance during the move)
                  / best I/O performance                           (1)
    lambda_time = move time / time of a plain copy of the image    (2)
    lambda_wear = workload data written to SSD / workload writes   (3)
    MC = lambda_time * (gamma * lambda_wear + (1 - gamma) * lambda_io)  (4)

``gamma`` (the volume type's ``fcache:wear_weight``) weighs flash wear
against I/O performance.  :func:`measured_cost` computes the figures of a
finished move from the agent's ``volume-move-status``; :func:`expected_cost`
predicts them for a scheme from the media, the size, the workload and the
bandwidths (:class:`Workload`), :func:`choose_scheme` picks the cheapest,
and :func:`plan_moves` does so for each volume of a batch, mixing schemes
(§7.4).  Nothing here does I/O.

The prediction is a small model, not a measurement; how it is built and
what it reproduces of the paper is in doc/reference/storage-migration-nova.rst.
"""

import math

# The paper's five, which ``auto`` chooses from.
SCHEMES = ('dbt', 'mirror', 'lr', 'slr', 'aio')
# fcache's own: run when asked for by name.
FCACHE_SCHEMES = ('dbt_capped',)
ALL_SCHEMES = SCHEMES + FCACHE_SCHEMES
MEDIA = ('ssd', 'hdd')
# Merge rounds in a row that shrink the dirty set by less than a tenth
# before dbt pauses the VM for the rest (move_copy.c, MOVE_STALLED_ROUNDS).
DBT_STALLED_ROUNDS = 3

# Streaming bandwidth of one medium, bytes/s.  Table 1 of the paper copies
# 5 GB SSD to SSD in 30 s (~180 MB/s) and with an HDD on one side in 55 to
# 59 s (~95 MB/s); an operator sets the bandwidths of their own storage.
DEFAULT_BANDWIDTH_BPS = {'ssd': 180 * 1000 * 1000, 'hdd': 95 * 1000 * 1000}
# Random I/O a VM gets from one medium, relative: Table 2 (50 % reads).
DEFAULT_IOPS = {'ssd': 5900.0, 'hdd': 1744.0}
# How much of a medium's random I/O performance the copy's streaming takes
# when it uses the whole medium: an HDD seeks between the copy and the VM
# (Figure 1: the VM on the HDD side loses most), an SSD much less.
DEFAULT_CONTENTION = {'ssd': 0.3, 'hdd': 0.8}
# §7.2: alpha is the share of the workload's writes that fall in the
# already-copied region (0.5 for writes spread evenly over one pass),
# beta the share that are to distinct blocks (what DBT copies again).
DEFAULT_ALPHA = 0.5
DEFAULT_BETA = 0.5
# The size of a VM's random writes: 4 KiB, the size of the random I/O
# figures in Table 4.
DEFAULT_REQUEST_BYTES = 4096


class Workload(object):
    """What the model needs to know of a volume and its VM.

    :param size_bytes: the volume size (bytes copied by a plain copy).
    :param write_bps: the VM's writes, bytes/s.
    :param read_bps: the VM's reads, bytes/s (default: as many as writes).
    :param alpha: share of writes to the copied region (§7.2).
    :param beta: share of writes to distinct blocks (§7.2).
    :param bandwidth_bps: ``{medium: bytes/s}``, overriding the defaults.
    :param depth: requests the VM keeps in flight (Table 7: IOmeter's OIO
        4 or 16; 1 for a VM that waits for each request, IOzone's).
    :param request_bytes: the size of the VM's writes: LR's copy skips
        each one the VM wrote ahead of it as a gap of its own.
    :param iops: ``{medium: random requests/s}``, overriding
        :data:`DEFAULT_IOPS` (with ``bandwidth_bps``, what an access costs
        a medium in bytes of its streaming).
    :raises ValueError: a figure is negative, not a number, or out of range.
    """

    def __init__(self, size_bytes, write_bps, read_bps=None,
                 alpha=DEFAULT_ALPHA, beta=DEFAULT_BETA, bandwidth_bps=None,
                 depth=1, request_bytes=DEFAULT_REQUEST_BYTES, iops=None):
        self.size_bytes = _number('size_bytes', size_bytes, positive=True)
        self.write_bps = _number('write_bps', write_bps)
        self.read_bps = (self.write_bps if read_bps is None
                         else _number('read_bps', read_bps))
        self.alpha = _fraction('alpha', alpha)
        self.beta = _fraction('beta', beta)
        self.depth = _number('depth', depth, positive=True)
        if self.depth < 1:
            raise ValueError('depth %r must be at least 1' % (depth,))
        self.request_bytes = _number('request_bytes', request_bytes,
                                     positive=True)
        self.iops = dict(DEFAULT_IOPS)
        for medium, rate in (iops or {}).items():
            self.iops[check_medium(medium)] = _number(
                'IOPS of %s' % medium, rate, positive=True)
        self.bandwidth_bps = dict(DEFAULT_BANDWIDTH_BPS)
        for medium, bps in (bandwidth_bps or {}).items():
            self.bandwidth_bps[check_medium(medium)] = _number(
                'bandwidth of %s' % medium, bps, positive=True)


class Cost(object):
    """The lambdas and MC of one move (expected or measured).

    ``lambda_io`` may be None (no performance figure was given), and then
    ``mc`` is None too; ``lambda_time`` is ``inf`` for a move that would
    not finish (a ``dbt_capped`` whose rounds do not converge, a copy with
    no bandwidth left).
    """

    def __init__(self, scheme, lambda_time, lambda_io, lambda_wear, gamma):
        self.scheme = scheme
        self.lambda_time = lambda_time
        self.lambda_io = lambda_io
        self.lambda_wear = lambda_wear
        self.gamma = gamma
        self.mc = migration_cost(lambda_time, lambda_io, lambda_wear, gamma)

    def as_dict(self):
        return {'scheme': self.scheme, 'lambda_time': self.lambda_time,
                'lambda_io': self.lambda_io, 'lambda_wear': self.lambda_wear,
                'gamma': self.gamma, 'mc': self.mc}

    def __repr__(self):
        return 'Cost(%r)' % self.as_dict()


def migration_cost(lambda_time, lambda_io, lambda_wear, gamma):
    """Equation (4): ``lambda_time * (g*wear + (1-g)*io)``; None if unknown.

    A move that does not finish (``lambda_time`` infinite) costs ``inf``.
    """
    gamma = check_gamma(gamma)
    if lambda_io is None or lambda_time is None or lambda_wear is None:
        return None
    weighted = gamma * lambda_wear + (1.0 - gamma) * lambda_io
    if math.isinf(lambda_time):
        return math.inf
    return lambda_time * weighted


def check_medium(medium):
    """Return ``medium`` if it is ``ssd`` or ``hdd``, else raise ValueError."""
    if medium not in MEDIA:
        raise ValueError('medium %r is not one of %s'
                         % (medium, ', '.join(MEDIA)))
    return medium


def check_scheme(scheme):
    if scheme not in ALL_SCHEMES:
        raise ValueError('scheme %r is not one of %s'
                         % (scheme, ', '.join(ALL_SCHEMES)))
    return scheme


def check_gamma(gamma):
    return _fraction('wear weight (gamma)', gamma)


# -- the expected cost ----------------------------------------------------

def expected_wear(scheme, src, dst, alpha=DEFAULT_ALPHA, beta=DEFAULT_BETA):
    """lambda_wear of ``scheme`` from ``src`` to ``dst``: Table 6.

    The copy's own writes are left out (the same for every scheme); what
    is counted is the workload's writes that reach an SSD, per workload
    write: the VM's writes on an SSD source, those a scheme duplicates or
    re-copies to an SSD destination.
    """
    if check_scheme(scheme) == 'dbt_capped':
        scheme = 'dbt'
    table = {
        ('ssd', 'ssd'): {'dbt': 1 + beta, 'mirror': 1 + alpha, 'lr': alpha,
                         'slr': 1.0, 'aio': 1 + alpha},
        ('hdd', 'ssd'): {'dbt': beta, 'mirror': alpha, 'lr': alpha,
                         'slr': alpha, 'aio': alpha},
        ('ssd', 'hdd'): {'dbt': 1.0, 'mirror': 1.0, 'lr': 0.0,
                         'slr': 1 - alpha, 'aio': 1.0},
        ('hdd', 'hdd'): dict.fromkeys(SCHEMES, 0.0),
    }
    return float(table[(check_medium(src), check_medium(dst))][scheme])


def faster_side(src, dst):
    """``'b'`` if the destination medium is the faster, else ``'a'``.

    What AIO takes for the faster disk.  The agent judges it by the write
    latency it measures of the two sides (move_aio.c), which for an SSD
    and an HDD comes out the same; between equal media either will do.
    """
    return 'b' if DEFAULT_IOPS[check_medium(dst)] > DEFAULT_IOPS[
        check_medium(src)] else 'a'


def routes(scheme, src, dst, alpha):
    """Where the VM's requests go, as the agent routes them.

    ``[(share of reads or writes, kind, disks)]`` with kind ``'r'`` or
    ``'w'`` and disks a tuple of ``'a'`` (source) and ``'b'``
    (destination); two disks means a synchronous duplicate (the slower one
    decides), ``('fast',)`` an asynchronous duplicate (the faster one).
    ``alpha`` is the share of requests to the copied region.
    """
    check_scheme(scheme)
    fast = faster_side(src, dst)
    if scheme in ('dbt', 'dbt_capped'):
        return [(1.0, 'r', ('a',)), (1.0, 'w', ('a',))]
    if scheme == 'mirror':
        return [(1.0, 'r', ('a',)), (1 - alpha, 'w', ('a',)),
                (alpha, 'w', ('a', 'b'))]
    if scheme == 'lr':
        return [(1 - alpha, 'r', ('a',)), (alpha, 'r', ('b',)),
                (1.0, 'w', ('b',))]
    if scheme == 'slr':
        return [(1.0, 'r', ('a',)), (1 - alpha, 'w', ('a',)),
                (alpha, 'w', ('b',))]
    # aio: reads of the copied region and its duplicated writes are
    # served by the faster medium; the rest stays on the source.
    return [(1 - alpha, 'r', ('a',)), (alpha, 'r', (fast,)),
            (1 - alpha, 'w', ('a',)), (alpha, 'w', ('fast',))]


def _disk_loads(routes, workload):
    """Bytes/s the VM puts on each disk (both copies of a duplicate)."""
    load = {'a': 0.0, 'b': 0.0}
    for share, kind, disks in routes:
        rate = workload.read_bps if kind == 'r' else workload.write_bps
        for disk in (('a', 'b') if disks == ('fast',) else disks):
            load[disk] += share * rate
    return load


def _dbt_times(workload, copy_bps, pause_bps):
    """``(move seconds, pause seconds)`` of the paper's DBT.

    While the VM dirties more slowly than the copy cleans (``q < 1``)
    the rounds shrink the dirty set to nothing and the pause copies
    next to nothing.  Otherwise the first pass leaves what the VM dirtied
    meanwhile (at most the volume), the rounds no longer shrink it, and
    after :data:`DBT_STALLED_ROUNDS` of them DBT holds the VM's requests
    and copies it at ``pause_bps`` (the copy alone on both media): the
    downtime of the paper's Table 3, SSD to HDD.
    """
    size = workload.size_bytes
    if copy_bps <= 0:
        return math.inf, 0.0
    q = workload.beta * workload.write_bps / copy_bps
    if q < 1:
        return size / copy_bps / (1 - q), 0.0
    dirty = min(size, q * size)
    pause_s = dirty / pause_bps
    return (size / copy_bps + DBT_STALLED_ROUNDS * dirty / copy_bps + pause_s,
            pause_s)


def _lr_pace_b(workload, left_b, bw_b, iops_b):
    """How fast LR's copy gets through the image as far as B allows.

    The VM writes ``skip`` bytes/s ahead of the copy (distinct blocks):
    the copy need not write them, but each is a gap between two of its
    writes to B, one more access costing ``k`` times a block's bytes of
    B's streaming.  At a pace ``p`` the copy writes ``p - skip`` bytes/s;
    while at most half of what it passes is skipped (``p >= 2 skip``)
    every skipped block is a gap of its own, and beyond that there are at
    most as many gaps as blocks it writes.  The pace is the fastest whose
    writes and gaps fit in ``left_b``.
    """
    skip = (1 - workload.alpha) * workload.beta * workload.write_bps
    if left_b <= 0:
        return 0.0
    k = bw_b / iops_b / workload.request_bytes
    if left_b >= skip * (1 + k):
        return left_b + skip - skip * k
    return skip + left_b / (1 + k)


def _move_time(scheme, workload, left, bw, perf):
    """Seconds the move takes, the copy having ``left[d]`` bytes/s of disk d.

    The copy reads A and writes B, so its pace is the lower of the two
    sides' bandwidth left by the VM.  LR's copy skips the blocks the VM
    wrote to B ahead of it (§5.1), but not for free: A is still read over
    them (the agent reads a chunk of A in one request, move_copy.c), and
    every skipped block splits the copy's write to B in two, one more
    access of B costing ``bw/perf`` bytes of its streaming (an HDD's seek).
    That is the paper's "overhead to check bitmap in the copy process"
    (§7.3.3) which SLR's copy does not have (§5.2.1): LR's copy is slower
    than SLR's where B is the slower side, and a move is never faster than
    a plain copy of the image (equation 2: lambda_time > 1).
    """
    size = workload.size_bytes
    copy_bps = min(left['a'], left['b'])
    if copy_bps <= 0:
        return math.inf
    if scheme == 'dbt_capped':
        # Each round copies what the VM dirtied (distinct blocks) during
        # the previous one: S/c * (1 + q + q^2 ...), q = beta*w/c.
        q = workload.beta * workload.write_bps / copy_bps
        if q >= 1:
            return math.inf
        return size / copy_bps / (1 - q)
    if scheme == 'lr':
        pace = min(left['a'], _lr_pace_b(workload, left['b'], bw['b'],
                                         perf['b']))
        return size / pace if pace > 0 else math.inf
    return size / copy_bps


def _request_seconds(routes, workload, perf, async_disk):
    """Mean time between two of the VM's requests, routed by ``routes``.

    Each disk serves its share of the requests at its own pace, the two
    disks at once.  A VM with one request in flight waits for each in
    turn: the mean of their service times (a synchronous duplicate waits
    for its slower disk, an asynchronous one for ``async_disk``).  With
    ``workload.depth`` in flight it waits less, down to the busiest disk's
    time per request of the VM (operational analysis' asymptotic bound:
    throughput <= min(N / D, 1 / D_max)).  So the writes SLR sends to a
    slower B cost the VM their share of that disk, not their latency on
    every request (§5.2.1: "most of the IO requests are now issued to the
    faster source disk"); only a VM that writes mostly to the copied
    region runs at the slow disk's pace.
    """
    total = workload.read_bps + workload.write_bps
    seconds = 0.0
    busy = {'a': 0.0, 'b': 0.0}
    for share, kind, disks in routes:
        rate = workload.read_bps if kind == 'r' else workload.write_bps
        weight = share * rate / total
        if disks == ('fast',):
            seconds += weight / perf[async_disk]
            busy[async_disk] += weight / perf[async_disk]
        else:
            seconds += weight * max(1 / perf[d] for d in disks)
            for d in disks:
                busy[d] += weight / perf[d]
    return max(seconds / workload.depth, max(busy.values()))


# Steps of the copy's progress over which _alpha_seen averages.
_PROGRESS_STEPS = 20


def _alpha_seen(scheme, src, dst, workload, perf, async_disk):
    """The share of the VM's writes behind the cursor, as the VM sees it.

    ``workload.alpha`` is that share for a VM that writes at the same pace
    all through the move.  A VM that waits for its storage does not: a
    scheme that serves the copied region from a faster disk (LR's reads
    and writes there, SLR's and AIO's writes) serves it faster as the
    cursor advances, so more of its writes come late, behind the cursor,
    and land on B.  Measured HDD to SSD with a paced workload the HDD
    cannot keep up with: LR 0.57, SLR and AIO 0.60, mirror 0.51
    (doc/research/storage-migration-bench.rst).  Each moment of the copy is
    weighted by the rate the VM's requests are served at then; the
    writes behind and ahead of the cursor keep ``alpha``'s odds, scaled
    by their rates.
    """
    behind = ahead = behind_w = ahead_w = 0.0
    for i in range(_PROGRESS_STEPS):
        x = (i + 0.5) / _PROGRESS_STEPS
        rate = 1 / _request_seconds(routes(scheme, src, dst, x), workload,
                                    perf, async_disk)
        behind += x * rate
        behind_w += x
        ahead += (1 - x) * rate
        ahead_w += 1 - x
    odds = (workload.alpha * behind / behind_w)
    rest = ((1 - workload.alpha) * ahead / ahead_w)
    return odds / (odds + rest) if odds + rest > 0 else workload.alpha


def expected_cost(scheme, src, dst, workload, gamma):
    """Predict the :class:`Cost` of moving with ``scheme``.

    ``src`` and ``dst`` are media (``ssd``/``hdd``), ``workload`` a
    :class:`Workload`.  The model:

    * each disk ``m`` streams ``B_m`` bytes/s; the VM's traffic on it
      (routed as the scheme routes it, §5) comes first and the copy gets
      what is left of the slower side: ``c = min(B_a - L_a, B_b - L_b)``;
    * move time from ``c`` (DBT's rounds as a geometric series; when the
      dirtying outpaces the copy, the way DBT struggles from SSD to HDD
      in §3.2 and §7.3.2, ``dbt`` pauses the VM for the copy of the
      dirty set and ``dbt_capped`` does not finish; LR's copy skipping
      what the VM wrote, each skipped block one more access of B: see
      :func:`_move_time`), against a plain copy at ``min(B_a, B_b)``;
    * a request served by medium ``m`` takes ``1/P_m`` (Table 2), slowed
      by the copy's share of the medium ``u_m = c/B_m`` to
      ``1/(P_m (1 - k_m u_m))``; a synchronous duplicate waits for the
      slower disk, an asynchronous one for the faster unless the slower
      cannot absorb the duplicates (AIO's throttle, §5.2.2); the VM's
      requests in flight (``workload.depth``) keep both disks busy at
      once (:func:`_request_seconds`); lambda_io = 1 - perf/max(P_a, P_b),
      where ``dbt``'s pause serves nothing;
    * lambda_wear from Table 6.
    """
    check_scheme(scheme)
    check_medium(src)
    check_medium(dst)
    gamma = check_gamma(gamma)
    media = {'a': src, 'b': dst}
    bw = dict((d, workload.bandwidth_bps[m]) for d, m in media.items())
    routed = routes(scheme, src, dst, workload.alpha)
    load = _disk_loads(routed, workload)
    left = dict((d, bw[d] - load[d]) for d in bw)
    copy_bps = min(left.values())
    plain_s = workload.size_bytes / min(bw['a'], bw['b'])
    pause_s = 0.0
    iops = dict((d, workload.iops[m]) for d, m in media.items())
    if scheme == 'dbt':
        move_s, pause_s = _dbt_times(workload, copy_bps,
                                     min(bw['a'], bw['b']))
    else:
        move_s = _move_time(scheme, workload, left, bw, iops)
    lambda_time = move_s / plain_s

    used = max(copy_bps, 0.0)
    perf = {}
    for disk, medium in media.items():
        share = min(1.0, used / bw[disk])
        perf[disk] = workload.iops[medium] * (
            1 - DEFAULT_CONTENTION[medium] * share)
    fast = faster_side(src, dst)
    slow = 'a' if fast == 'b' else 'b'
    # The slower disk absorbs asynchronous duplicates only while it has
    # bandwidth for them; past that AIO delays writes to its pace.
    dup = workload.alpha * workload.write_bps
    throttled = dup > bw[slow] - used

    total = workload.read_bps + workload.write_bps
    alpha_seen = workload.alpha
    if total <= 0 or math.isinf(move_s):
        lambda_io = 0.0 if total <= 0 else 1.0
    else:
        seconds = _request_seconds(routed, workload, perf,
                                   slow if throttled else fast)
        best = max(workload.iops[src], workload.iops[dst])
        served = (1 / seconds) * (1 - pause_s / move_s)
        lambda_io = max(0.0, 1 - served / best)
        alpha_seen = _alpha_seen(scheme, src, dst, workload, perf,
                                 slow if throttled else fast)
    lambda_wear = expected_wear(scheme, src, dst, alpha_seen, workload.beta)
    return Cost(scheme, lambda_time, lambda_io, lambda_wear, gamma)


def choose_scheme(src, dst, workload, gamma, schemes=SCHEMES):
    """Return ``(scheme, costs)``: the lowest expected MC, and every cost.

    Between equal MCs (from HDD to HDD with gamma 1 every MC is 0) the
    shorter move wins, then the scheme listed first in ``schemes``.
    """
    costs = [expected_cost(s, src, dst, workload, gamma) for s in schemes]
    best = min(costs, key=lambda c: (c.mc, c.lambda_time))
    return best.scheme, costs


def plan_moves(moves, schemes=SCHEMES):
    """Choose a scheme for each move of a batch (§7.4, mixing schemes).

    ``moves`` is an iterable of dicts ``{"volume_id", "from_medium",
    "to_medium", "workload": Workload, "wear_weight"}``.  Each move gets
    the scheme of lowest expected MC for its own media and gamma; the
    batch's MC is the sum (§7.4: the cost of a massive migration is the
    sum of its moves').  Returns ``{"moves": [{"volume_id", "scheme",
    "expected": Cost.as_dict()}], "total_mc", "single": {scheme:
    total_mc}}``, where ``single`` is the batch's MC had every move used
    that one scheme, for comparison.
    """
    planned = []
    single = dict.fromkeys(schemes, 0.0)
    total = 0.0
    for move in moves:
        scheme, costs = choose_scheme(move['from_medium'], move['to_medium'],
                                      move['workload'], move['wear_weight'],
                                      schemes)
        for cost in costs:
            single[cost.scheme] += cost.mc
        chosen = [c for c in costs if c.scheme == scheme][0]
        total += chosen.mc
        planned.append({'volume_id': move['volume_id'], 'scheme': scheme,
                        'expected': chosen.as_dict()})
    return {'moves': planned, 'total_mc': total, 'single': single}


# -- the measured cost ----------------------------------------------------

def measured_cost(status, baseline_copy_s, src, dst, gamma,
                  best_io_bps=None, io_bps=None):
    """The :class:`Cost` of a finished move from its ``volume-move-status``.

    :param status: the agent's ``volume-move-status`` result (state
        ``done``): ``elapsed_s``, ``bytes_copied`` and ``io`` with
        ``a_read_bytes, a_write_bytes, b_read_bytes, b_write_bytes,
        vm_write_bytes`` (``a`` the source, ``b`` the destination).
    :param baseline_copy_s: seconds a plain copy of the image took
        (``qemu-img convert`` or ``dd`` of the idle volume between the same
        two media): the denominator of (2).
    :param src, dst: the media of the source and the destination.
    :param gamma: the wear weight.
    :param best_io_bps: the VM's I/O throughput (bytes/s) on the faster
        medium with no move running; without it lambda_io and MC are None.
    :param io_bps: the VM's throughput during the move as the workload
        measured it; by default ``(reads + writes) / elapsed_s`` from the
        counters, where the VM's reads are every read of A and B less the
        copy's ``bytes_copied`` (for a workload that runs flat out).

    lambda_wear counts the writes that reached an SSD (A's if the source
    is one, B's less the copy's ``bytes_total`` if the destination is),
    per byte the VM wrote; 0 when the VM wrote nothing.
    :raises ValueError: the status is not a finished move or lacks a
        figure.
    """
    check_medium(src)
    check_medium(dst)
    gamma = check_gamma(gamma)
    if status.get('state') != 'done':
        raise ValueError('the move of volume %s is %s, not done: only a '
                         'finished move has a cost' % (
                             status.get('volume_id'), status.get('state')))
    baseline = _number('baseline_copy_s', baseline_copy_s, positive=True)
    io = status.get('io') or {}
    elapsed = _number('elapsed_s', status.get('elapsed_s'), positive=True)
    counters = {}
    for key in ('a_read_bytes', 'a_write_bytes', 'b_read_bytes',
                'b_write_bytes', 'vm_write_bytes'):
        counters[key] = _number('io.' + key, io.get(key))
    copied = _number('bytes_copied', status.get('bytes_copied'))
    total = _number('bytes_total', status.get('bytes_total'))

    lambda_time = elapsed / baseline
    ssd_writes = 0.0
    if src == 'ssd':
        ssd_writes += counters['a_write_bytes']
    if dst == 'ssd':
        ssd_writes += max(0.0, counters['b_write_bytes'] - total)
    vm_writes = counters['vm_write_bytes']
    lambda_wear = ssd_writes / vm_writes if vm_writes else 0.0

    lambda_io = None
    if best_io_bps is not None:
        best = _number('best_io_bps', best_io_bps, positive=True)
        if io_bps is None:
            vm_reads = max(0.0, counters['a_read_bytes'] +
                           counters['b_read_bytes'] - copied)
            io_bps = (vm_reads + vm_writes) / elapsed
        during = _number('io_bps', io_bps)
        lambda_io = max(0.0, (best - during) / best)
    return Cost(status.get('scheme'), lambda_time, lambda_io, lambda_wear,
                gamma)


def _number(name, value, positive=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError('%s %r is not a number' % (name, value))
    if math.isnan(value) or value < 0 or (positive and value == 0):
        raise ValueError('%s %r must be %s' % (
            name, value, 'positive' if positive else 'zero or more'))
    return float(value)


def _fraction(name, value):
    value = _number(name, value)
    if value > 1:
        raise ValueError('%s %r must be from 0 to 1' % (name, value))
    return value
