# SPDX-License-Identifier: Apache-2.0
"""The synthetic trace generator (bench.traces)."""

import collections
import json
import os

import numpy as np
import pytest

from bench.traces import formats
from bench.traces import generate
from bench.traces import shapes

DAY = shapes.DAY


def _gen(tmp_path, name, *extra):
    out = str(tmp_path / name)
    argv = ['--out', out] + list(extra)
    assert generate.main(argv) == 0
    return out


def _read(path):
    with open(path, 'rb') as f:
        return f.read()


def _all(profiles, seed=1):
    return np.concatenate(list(shapes.stream(profiles, seed)))


def _csv_requests(path):
    chunks = list(formats.read_csv(path))
    return np.concatenate([c for c, _ in chunks]), chunks[-1][1]


def _oracle(path):
    return np.concatenate(list(formats.read_oracle(path)))


@pytest.mark.parametrize('fmt', ['csv', 'oracle'])
def test_same_seed_same_bytes(tmp_path, fmt):
    args = ['--shape', 'mix', '--requests', '20000', '--days', '14',
            '--scan-blocks', '4096', '--format', fmt]
    a = _gen(tmp_path, 'a', '--seed', '5', *args)
    b = _gen(tmp_path, 'b', '--seed', '5', *args)
    c = _gen(tmp_path, 'c', '--seed', '6', *args)
    assert _read(a) == _read(b)
    assert _read(a) != _read(c)


def test_cli_prints_summary(tmp_path, capsys):
    _gen(tmp_path, 't.csv', '--shape', 'scan', '--requests', '1000',
         '--days', '14', '--scan-blocks', '320')
    summary = json.loads(capsys.readouterr().out)
    # Two scans (at 5.25 and 12.25 days) of 10 requests of 32 blocks.
    assert summary['scans'] == 2
    assert summary['requests'] == 1000 + 2 * 10
    assert summary['block_accesses'] == 1000 + 2 * 320
    assert summary['volumes'] == ['vol0']


def test_bad_arguments_exit_2(tmp_path):
    assert generate.main(['--shape', 'zipf', '--out', str(tmp_path / 'x'),
                          '--hot-blocks', '0']) == 2


def test_requests_are_in_time_order():
    reqs = _all(shapes.profiles_for('mix', 30000, 14 * DAY,
                                    scan_blocks=8192))
    assert np.all(np.diff(reqs['t']) >= 0)
    # Poisson arrivals: the last one comes about at the end.
    assert 13 * DAY < reqs['t'][-1] < 15 * DAY
    assert np.all(reqs['block'] >= 0)
    assert np.all(reqs['block'] + reqs['nblk'] <= 1 << 20)


def test_csv_round_trip(tmp_path):
    out = _gen(tmp_path, 't.csv', '--shape', 'mix', '--requests', '5000',
               '--days', '7', '--scan-blocks', '2048', '--req-blocks', '3',
               '--seed', '9')
    got, names = _csv_requests(out)
    want = _all(generate.profiles_from_args(generate.build_parser()
                .parse_args(['--shape', 'mix', '--requests', '5000',
                             '--days', '7', '--scan-blocks', '2048',
                             '--req-blocks', '3', '--out', 'x'])), seed=9)
    assert sorted(names) == ['db', 'drift', 'light', 'web']
    by_name = ['web', 'db', 'drift', 'light']
    assert len(got) == len(want)
    assert np.allclose(got['t'], want['t'], atol=1e-6)
    assert [names[v] for v in got['vol']] == [by_name[v]
                                              for v in want['vol']]
    for f in ('op', 'block', 'nblk'):
        assert np.array_equal(got[f], want[f])
    with open(out) as f:
        first = f.readline().strip().split(',')
    assert len(first) == 5 and first[2] in ('R', 'W')
    assert int(first[3]) % 4096 == 0 and int(first[4]) % 4096 == 0


def test_oracle_matches_csv_block_by_block(tmp_path):
    common = ['--shape', 'mix', '--requests', '4000', '--days', '7',
              '--scan-blocks', '1024', '--req-blocks', '2', '--seed', '2']
    csv = _gen(tmp_path, 't.csv', '--format', 'csv', *common)
    bin_ = _gen(tmp_path, 't.bin', '--format', 'oracle', *common)
    reqs, names = _csv_requests(csv)
    rec = _oracle(bin_)
    assert os.path.getsize(bin_) == 24 * len(rec)
    assert len(rec) == int(reqs['nblk'].sum())
    order = ['web', 'db', 'drift', 'light']
    ids = []
    for v, b, n in zip(reqs['vol'], reqs['block'], reqs['nblk']):
        vol = order.index(names[v])
        ids.extend((vol << formats.VOLUME_SHIFT) + b + i for i in range(n))
    assert rec['obj_id'].tolist() == ids
    assert np.all(rec['obj_size'] == 4096)
    times = np.repeat(np.floor(reqs['t']), reqs['nblk'])
    assert np.array_equal(rec['clock_time'], times.astype(np.uint32))


def _next_access_brute(ids):
    nxt, seen = [-1] * len(ids), {}
    for i in range(len(ids) - 1, -1, -1):
        nxt[i] = seen.get(ids[i], -1)
        seen[ids[i]] = i + 1            # 1-based, like libCacheSim
    return nxt


def test_oracle_next_access_vtime(tmp_path):
    out = _gen(tmp_path, 't.bin', '--format', 'oracle', '--shape', 'zipf',
               '--requests', '20000', '--hot-blocks', '500', '--days', '1')
    rec = _oracle(out)
    assert (rec['next_access_vtime'].tolist()
            == _next_access_brute(rec['obj_id'].tolist()))


def test_next_access_across_pass_chunks(tmp_path):
    rng = np.random.default_rng(3)
    rec = np.zeros(1000, dtype=formats.ORACLE_DTYPE)
    rec['obj_id'] = rng.integers(0, 50, 1000)
    path = str(tmp_path / 'x.bin')
    with open(path, 'w+b') as f:
        f.write(rec.tobytes())
        formats.fill_next_access(f, chunk_records=37)
    got = _oracle(path)
    assert (got['next_access_vtime'].tolist()
            == _next_access_brute(rec['obj_id'].tolist()))


def test_scan_is_sequential():
    p = shapes.Profile('v', 0, 21 * DAY, scan_period=7 * DAY,
                       scan_blocks=10000, scan_start=4096,
                       scan_req_blocks=32, scan_seconds=3600.0)
    reqs = _all([p])
    starts = p.scan_times()
    assert starts == [5.25 * DAY, 12.25 * DAY, 19.25 * DAY]
    per_scan = -(-10000 // 32)
    assert len(reqs) == 3 * per_scan
    assert np.all(reqs['op'] == shapes.OP_READ)
    for k, t0 in enumerate(starts):
        s = reqs[k * per_scan:(k + 1) * per_scan]
        assert s['block'][0] == 4096
        # Each request starts where the previous one ended.
        assert np.array_equal(s['block'][1:], s['block'][:-1]
                              + s['nblk'][:-1])
        assert int(s['nblk'].sum()) == 10000
        assert s['t'][0] == t0 and s['t'][-1] < t0 + 3600.0


def test_scan_shape_adds_scans_to_zipf():
    reqs = _all(shapes.profiles_for('scan', 20000, 21 * DAY,
                                    scan_blocks=64000))
    scan = reqs[reqs['nblk'] == 32]
    assert len(scan) == 3 * 2000
    assert len(reqs) == 20000 + 3 * 2000


def _top_share(blocks, frac):
    counts = np.sort(np.array(list(collections.Counter(
        blocks.tolist()).values())))[::-1]
    k = max(1, int(len(counts) * frac))
    return counts[:k].sum() / counts.sum()


def test_zipf_is_skewed():
    def blocks(alpha):
        p = shapes.Profile('v', 50000, DAY, hot_blocks=5000,
                           zipf_alpha=alpha, cold_fraction=0.0)
        return _all([p])['block']
    skewed, flat = blocks(1.0), blocks(0.0)
    assert _top_share(skewed, 0.01) > 0.3
    assert _top_share(flat, 0.01) < 0.05
    # Rank 1 is about 1 / H(5000) ~ 11 % of the accesses.
    top = collections.Counter(skewed.tolist()).most_common(1)[0][1]
    assert 0.09 < top / 50000 < 0.13


def test_cold_fraction_spreads_over_the_volume():
    p = shapes.Profile('v', 20000, DAY, hot_blocks=1000, cold_fraction=0.5)
    b = _all([p])['block']
    hot = (b >= p.hot_base) & (b < p.hot_base + 1000)
    assert 0.45 < hot.mean() < 0.56


def _hot_set(reqs, lo, hi, k=100):
    sel = reqs[(reqs['t'] >= lo) & (reqs['t'] < hi)]['block'].tolist()
    return {b for b, _ in collections.Counter(sel).most_common(k)}


@pytest.mark.parametrize('drift,most,least', [(4 * DAY, 0.0, 0.3),
                                              (0.0, 0.7, 1.0)])
def test_drift_changes_the_hot_set(drift, most, least):
    p = shapes.Profile('v', 100000, 8 * DAY, hot_blocks=2000,
                       zipf_alpha=1.0, cold_fraction=0.0, drift_period=drift)
    reqs = _all([p])
    first = _hot_set(reqs, 0, DAY)
    last = _hot_set(reqs, 7 * DAY, 8 * DAY)
    overlap = len(first & last) / len(first)
    assert most <= overlap <= least


def test_drift_keeps_popularity_while_sliding():
    p = shapes.Profile('v', 1, 10.0, hot_blocks=100, hot_base=1000,
                       drift_period=100.0)
    slots = np.arange(100)
    at0 = shapes.hot_slot_block(p, slots, np.zeros(100))
    at5 = shapes.hot_slot_block(p, slots, np.full(100, 5.0))
    assert sorted(at0.tolist()) == list(range(1000, 1100))
    assert sorted(at5.tolist()) == list(range(1005, 1105))
    # Only the slots that fell off the window's start moved.
    assert np.sum(at0 != at5) == 5


def test_mix_volumes_differ():
    profiles = shapes.profiles_for('mix', 40000, 14 * DAY,
                                   scan_blocks=16384)
    assert [p.name for p in profiles] == ['web', 'db', 'drift', 'light']
    reqs = _all(profiles)
    fg = reqs[reqs['nblk'] != 32]
    share = np.bincount(fg['vol'], minlength=4) / len(fg)
    assert np.allclose(share, [0.4, 0.3, 0.2, 0.1], atol=0.01)
    scans = reqs[reqs['nblk'] == 32]
    assert set(scans['vol'].tolist()) == {0}
    assert [len(p.scan_times()) for p in profiles] == [2, 0, 0, 0]
    assert profiles[1].hot_blocks < profiles[0].hot_blocks


def test_libcachesim_reads_the_oracle_file(tmp_path):
    lcs = pytest.importorskip('libcachesim')
    out = _gen(tmp_path, 't.bin', '--format', 'oracle', '--shape', 'scan',
               '--requests', '20000', '--days', '7', '--hot-blocks', '2000',
               '--scan-blocks', '3000')
    ids = _oracle(out)['obj_id'].tolist()
    cap = 1500
    lru, hits = collections.OrderedDict(), 0
    for x in ids:
        if x in lru:
            lru.move_to_end(x)
            hits += 1
        else:
            lru[x] = True
            if len(lru) > cap:
                lru.popitem(last=False)
    reader = lcs.TraceReader(out, lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss, _ = lcs.LRU(cap * 4096).process_trace(reader)
    assert abs((1 - miss) - hits / len(ids)) < 1e-9
