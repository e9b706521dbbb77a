# SPDX-License-Identifier: Apache-2.0
"""fcache-replay on tiny hand-made traces whose answers are worked out by
hand in each test: LRU, RWS_1 admission through address staging and its
bound, HEC's touch count and sequential rejection, strict against
replacement-time enforcement on two volumes, the oracleGeneral reader,
window profiling, the JSON schema of doc/research/replay.rst and bad input.

The binary is built once (``make -C fcache_agent build/fcache-replay``)
and run from a private copy, as test_vmload does, so that another
engineer's rebuild cannot swap it mid-session.
"""

import json
import os
import shutil
import struct
import subprocess

import pytest

from fcache_testkit import harness

REPLAY = os.path.join(harness.AGENT_DIR, 'build', 'fcache-replay')
BS = 4096

TOP_KEYS = ('requests', 'block_accesses', 'hits', 'staging_hits', 'hit_ratio',
            'flash_writes', 'flash_write_ratio', 'mean_allocation_blocks',
            'mean_cached_blocks', 'max_cached_blocks', 'windows', 'elapsed_s',
            'requests_per_s', 'volumes')
VOLUME_KEYS = ('requests', 'block_accesses', 'hits', 'staging_hits',
               'hit_ratio', 'flash_writes', 'flash_write_ratio',
               'mean_allocation_blocks', 'mean_cached_blocks',
               'max_cached_blocks', 'windows', 'rwss_observed',
               'rwss_predicted', 'prediction_mare')


@pytest.fixture(scope='module')
def replay_bin(tmp_path_factory):
    """A private copy of fcache-replay.

    FCACHE_REPLAY_BIN names another build to test (a sanitizer build, say)
    instead of building one.
    """
    src = os.environ.get('FCACHE_REPLAY_BIN')
    if not src:
        src = REPLAY
        r = subprocess.run(['make', '-s', '-C', harness.AGENT_DIR,
                            'build/fcache-replay'],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=600)
        if r.returncode != 0 and not os.path.exists(REPLAY):
            raise AssertionError('cannot build fcache-replay:\n%s' %
                                 r.stdout.decode(errors='replace')[-4000:])
    dest = str(tmp_path_factory.mktemp('replay') / 'fcache-replay')
    shutil.copy2(src, dest)
    return dest


def write_csv(path, rows, header=False):
    """rows: (time, volume, op, first block, number of blocks)."""
    with open(path, 'w') as f:
        if header:
            f.write('time,volume,op,offset,length\n')
        for t, vol, op, block, n in rows:
            f.write('%s,%s,%s,%d,%d\n' % (t, vol, op, block * BS, n * BS))
    return str(path)


def run(binary, trace, *args, expect=0):
    r = subprocess.run([binary] + list(args) + [str(trace)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    out = r.stdout.decode()
    err = r.stderr.decode()
    assert r.returncode == expect, 'exit %d\nstdout:\n%s\nstderr:\n%s' % (
        r.returncode, out, err)
    return out, err


def run_json(binary, trace, *args):
    out, _ = run(binary, trace, '--json', *args)
    return json.loads(out)


def counts(doc):
    keys = ('requests', 'block_accesses', 'hits', 'staging_hits',
            'flash_writes')
    return dict((k, doc[k]) for k in keys)


# One volume, reads of blocks 0, 1, 0, a write of 2-3, then 1 and 0.
SMALL = [(0, 'a', 'R', 0, 1), (1, 'a', 'R', 1, 1), (2, 'a', 'R', 0, 1),
         (3, 'a', 'W', 2, 2), (4, 'a', 'R', 1, 1), (5, 'a', 'R', 0, 1)]


def test_lru_hand_computed(replay_bin, tmp_path):
    # A 2-block LRU: 0 miss [0]; 1 miss [1 0]; 0 hit [0 1]; 2 miss evicts 1
    # [2 0]; 3 miss evicts 0 [3 2]; 1 miss [1 3]; 0 miss [0 1].  One hit in
    # 7 block accesses, and every miss is written to the flash.
    trace = write_csv(tmp_path / 't.csv', SMALL, header=True)
    doc = run_json(replay_bin, trace, '--policy', 'lru', '--cache-size', '8K')
    assert counts(doc) == {'requests': 6, 'block_accesses': 7, 'hits': 1,
                           'staging_hits': 0, 'flash_writes': 6}
    assert doc['hit_ratio'] == pytest.approx(1 / 7)
    assert doc['flash_write_ratio'] == pytest.approx(6 / 7)
    assert doc['max_cached_blocks'] == 2
    assert doc['volumes']['a']['hits'] == 1
    # lru keeps no demand series
    assert doc['volumes']['a']['rwss_observed'] == []
    assert doc['volumes']['a']['prediction_mare'] is None


def test_lru_write_hit_is_a_flash_write(replay_bin, tmp_path):
    rows = [(0, 'a', 'R', 7, 1), (1, 'a', 'W', 7, 1), (2, 'a', 'W', 7, 1)]
    trace = write_csv(tmp_path / 't.csv', rows)
    doc = run_json(replay_bin, trace, '--policy', 'lru', '--cache-size', '1M')
    # the miss is admitted, and both write hits rewrite the cached block
    assert counts(doc) == {'requests': 3, 'block_accesses': 3, 'hits': 2,
                           'staging_hits': 0, 'flash_writes': 3}


def test_rws1_address_staging_hand_computed(replay_bin, tmp_path):
    # RWS_1 admits a block on its second access while staged: 0 and 1 are
    # staged; 0 is admitted (flash write 1); 2 and 3 are staged by the
    # write; 1 is admitted (flash write 2); 0 hits.
    trace = write_csv(tmp_path / 't.csv', SMALL)
    doc = run_json(replay_bin, trace, '--policy', 'rws', '--rws-n', '1',
                   '--staging', 'address', '--cache-size', '1M')
    assert counts(doc) == {'requests': 6, 'block_accesses': 7, 'hits': 1,
                           'staging_hits': 0, 'flash_writes': 2}
    vol = doc['volumes']['a']
    # one window: RWS_1 = {0, 1} (0 accessed 3 times, 1 twice)
    assert vol['rwss_observed'] == [2]
    assert vol['rwss_predicted'] == [None]
    assert doc['windows'] == 1


def test_rws2_needs_three_accesses(replay_bin, tmp_path):
    rows = [(i, 'a', 'R', 5, 1) for i in range(4)]
    trace = write_csv(tmp_path / 't.csv', rows)
    doc = run_json(replay_bin, trace, '--policy', 'rws', '--rws-n', '2',
                   '--staging', 'address', '--cache-size', '1M')
    # staged, staged, admitted on the third access, then a hit
    assert counts(doc) == {'requests': 4, 'block_accesses': 4, 'hits': 1,
                           'staging_hits': 0, 'flash_writes': 1}


def test_staging_bound(replay_bin, tmp_path):
    # 64 blocks of cache, staging 0.1 % = 262 bytes = 10 addresses of 24 B.
    # Blocks 0..10 once each: 10 pushes 0 out of the area, into the reuse
    # history beneath it (one share long).  0 again: its count comes back
    # from the history, admitted; 10 is still staged: admitted; 10 again:
    # a hit; 1, still in the area: admitted.
    rows = [(i, 'a', 'R', i, 1) for i in range(11)]
    rows += [(11, 'a', 'R', 0, 1), (12, 'a', 'R', 10, 1),
             (13, 'a', 'R', 10, 1), (14, 'a', 'R', 1, 1)]
    trace = write_csv(tmp_path / 't.csv', rows)
    doc = run_json(replay_bin, trace, '--policy', 'rws', '--staging',
                   'address', '--staging-fraction', '0.001',
                   '--cache-size', '256K')
    assert counts(doc) == {'requests': 15, 'block_accesses': 15, 'hits': 1,
                           'staging_hits': 0, 'flash_writes': 3}


def test_data_staging_hits(replay_bin, tmp_path):
    # N = 2 with data staging: the first read stages the data, the second
    # is served from memory (a staging hit, not a cache hit), the third
    # admits it, the fourth hits the cache.
    rows = [(i, 'a', 'R', 3, 1) for i in range(4)]
    trace = write_csv(tmp_path / 't.csv', rows)
    doc = run_json(replay_bin, trace, '--policy', 'rws', '--rws-n', '2',
                   '--staging', 'data', '--cache-size', '64M')
    assert counts(doc) == {'requests': 4, 'block_accesses': 4, 'hits': 1,
                           'staging_hits': 2, 'flash_writes': 1}
    assert doc['hit_ratio'] == pytest.approx(0.25)


def test_hec_touch_count_and_sequential_rejection(replay_bin, tmp_path):
    # Block 0 touches 4 MiB region 0 (not admitted).  Then one 8 MiB
    # request from block 0: its first 4 MiB (blocks 0..1023, region 0)
    # are admitted; past 4 MiB the sequence is a scan (and region 1 was
    # never touched): rejected.  Block 5 then hits.
    rows = [(0, 'a', 'R', 0, 1), (1, 'a', 'R', 0, 2048), (2, 'a', 'R', 5, 1)]
    trace = write_csv(tmp_path / 't.csv', rows)
    doc = run_json(replay_bin, trace, '--policy', 'hec', '--cache-size', '64M')
    assert counts(doc) == {'requests': 3, 'block_accesses': 2050,
                           'hits': 1, 'staging_hits': 0,
                           'flash_writes': 1024}
    assert doc['max_cached_blocks'] == 1024


# Two volumes, 10 s windows, allocation by the last WSS without headroom
# and spare left idle, so that shares follow the trace exactly:
#  t=0   a reads 0-3 (4 misses), b reads 100 (1 miss); shares 4 and 4
#  t=10  window 0 closed: WSS a=4, b=1, shares 4 and 1; a reads 0: a hit
#  t=20  window 1 closed: WSS a=1, b=0, shares 1 and 0; a reads 1-3
# strict drops a's blocks over its new share (1, 2, 3) at t=20: 3 misses;
# replacement leaves them until someone needs the room: 3 hits.
TWO_VOLUMES = [(0, 'a', 'R', 0, 4), (0, 'b', 'R', 100, 1),
               (10, 'a', 'R', 0, 1), (20, 'a', 'R', 1, 3)]
WSS_ARGS = ('--policy', 'wss', '--predictor', 'last', '--spare', 'idle',
            '--headroom', '0', '--window', '10', '--cache-size', '32K')


def test_strict_vs_replacement_enforcement(replay_bin, tmp_path):
    trace = write_csv(tmp_path / 't.csv', TWO_VOLUMES)
    rep = run_json(replay_bin, trace, *WSS_ARGS)
    strict = run_json(replay_bin, trace, '--enforce', 'strict', *WSS_ARGS)

    assert rep['config']['enforce'] == 'replacement'
    assert strict['config']['enforce'] == 'strict'
    a, b = rep['volumes']['a'], rep['volumes']['b']
    assert (a['block_accesses'], a['hits'], a['flash_writes']) == (8, 4, 4)
    assert (b['block_accesses'], b['hits'], b['flash_writes']) == (1, 0, 1)
    a, b = strict['volumes']['a'], strict['volumes']['b']
    assert (a['block_accesses'], a['hits'], a['flash_writes']) == (8, 1, 7)
    assert (b['block_accesses'], b['hits'], b['flash_writes']) == (1, 0, 1)

    # The demand series are the same either way: WSS per window, and the
    # last-value prediction in force (none in the first window).
    for doc in (rep, strict):
        assert doc['windows'] == 3
        assert doc['volumes']['a']['rwss_observed'] == [4, 1, 3]
        assert doc['volumes']['a']['rwss_predicted'] == [None, 4, 1]
        assert doc['volumes']['b']['rwss_observed'] == [1, 0, 0]
        # a: window 1 |4 - 1| / 1 = 3; window 2, where the trace ends,
        # is cut short and counts in no error
        assert doc['volumes']['a']['prediction_mare'] == pytest.approx(3)
        # shares in force: a 4, 4, 1; b 4, 1, 0
        assert doc['volumes']['a']['mean_allocation_blocks'] == \
            pytest.approx(9 / 3)
        assert doc['volumes']['b']['mean_allocation_blocks'] == \
            pytest.approx(5 / 3)


def test_volume_limit_partitions_lru(replay_bin, tmp_path):
    # lru with a 1-block limit per volume: each volume keeps only its
    # last block, whatever the other does.
    rows = [(0, 'a', 'R', 1, 1), (1, 'b', 'R', 1, 1), (2, 'a', 'R', 2, 1),
            (3, 'b', 'R', 1, 1), (4, 'a', 'R', 1, 1)]
    trace = write_csv(tmp_path / 't.csv', rows)
    doc = run_json(replay_bin, trace, '--policy', 'lru', '--cache-size',
                   '1M', '--volume-limit', '4K')
    assert doc['volumes']['a']['hits'] == 0
    assert doc['volumes']['b']['hits'] == 1
    assert doc['volumes']['a']['max_cached_blocks'] == 1


def oracle_records(ids, times=None):
    times = times or list(range(len(ids)))
    return b''.join(struct.pack('<IQIq', t, i, BS, -1)
                    for t, i in zip(times, ids))


def test_oracle_round_trip(replay_bin, tmp_path):
    ids = [0, 1, 0, 2, 3, 1, 0, 5, 5, 2 ** 40 + 3]
    trace = tmp_path / 't.oracleGeneral'
    trace.write_bytes(oracle_records(ids))
    csv = write_csv(tmp_path / 't.csv',
                    [(i, '0', 'R', b, 1) for i, b in enumerate(ids)])
    for policy in ('lru', 'rws', 'noalloc'):
        args = ('--policy', policy, '--cache-size', '12K', '--window', '4')
        o = run_json(replay_bin, trace, *args)
        c = run_json(replay_bin, csv, *args)
        for d in (o, c):
            del d['elapsed_s'], d['requests_per_s']
        assert o == c, policy
        assert list(o['volumes']) == ['0']
    # the extension picks the format; --format overrides it
    bin_trace = tmp_path / 'other.bin'
    bin_trace.write_bytes(oracle_records(ids))
    assert run_json(replay_bin, bin_trace, '--policy', 'lru',
                    '--cache-size', '12K')['requests'] == len(ids)
    raw = tmp_path / 'noext'
    raw.write_bytes(oracle_records(ids))
    assert run_json(replay_bin, raw, '--format', 'oracle', '--policy', 'lru',
                    '--cache-size', '12K')['hits'] == 2


def test_oracle_volume_shift(replay_bin, tmp_path):
    ids = [(1 << 40) | 7, (2 << 40) | 7, (1 << 40) | 7]
    trace = tmp_path / 't.oracleGeneral'
    trace.write_bytes(oracle_records(ids))
    doc = run_json(replay_bin, trace, '--oracle-volume-shift', '40',
                   '--policy', 'lru', '--cache-size', '1M')
    assert sorted(doc['volumes']) == ['1', '2']
    assert doc['volumes']['1']['hits'] == 1


def test_json_schema(replay_bin, tmp_path):
    trace = write_csv(tmp_path / 't.csv', TWO_VOLUMES)
    for policy in ('lru', 'noalloc', 'wss', 'rws', 'hec'):
        doc = run_json(replay_bin, trace, '--policy', policy,
                       '--cache-size', '1M', '--window', '10')
        for k in TOP_KEYS:
            assert k in doc, (policy, k)
        assert sorted(doc['volumes']) == ['a', 'b']
        for vol in doc['volumes'].values():
            for k in VOLUME_KEYS:
                assert k in vol, (policy, k)
            assert len(vol['rwss_observed']) == len(vol['rwss_predicted'])
        assert doc['config']['policy'] == policy


def test_table_output(replay_bin, tmp_path):
    trace = write_csv(tmp_path / 't.csv', TWO_VOLUMES)
    out, _ = run(replay_bin, trace, '--cache-size', '1M')
    lines = out.splitlines()
    assert lines[0].startswith('policy rws')
    assert any(line.split()[0] == 'total' for line in lines[2:])
    assert 'requests/s' in lines[-1]


def test_profile_prints_a_knee(replay_bin, tmp_path):
    # A block reused every 50 s: a 10 s window sees no reuse (RWSS 0, no
    # allocation, no hits); 100 s and longer windows see it.
    rows = []
    for k in range(40):
        rows.append((k * 50, 'a', 'R', 1, 1))
        rows.append((k * 50 + 1, 'a', 'R', 1000 + k, 1))
    trace = write_csv(tmp_path / 't.csv', rows)
    out, _ = run(replay_bin, trace, '--profile-windows', '10,100,400,1000',
                 '--cache-size', '1M', '--staging', 'address')
    assert 'knee' in out
    doc = run_json(replay_bin, trace, '--profile-windows', '1000,10,400,100',
                   '--cache-size', '1M', '--staging', 'address')
    assert [p['window_s'] for p in doc['profile']] == [10, 100, 400, 1000]
    assert doc['knee_window_s'] in (10, 100, 400, 1000)
    assert doc['profile'][doc['knee_index']]['window_s'] == \
        doc['knee_window_s']
    assert doc['profile'][0]['hit_ratio'] <= doc['profile'][-1]['hit_ratio']


def test_profile_gives_the_online_knee(replay_bin, tmp_path):
    # What the agent's allocation_window = auto would choose: block 1 read
    # every 50 s between cold blocks, so 39 of the 80 accesses are reuses
    # after 50 s.  The estimate over the powers of two seconds within the
    # profile's windows (16 .. 512 s) is 0 up to 32 s and 39/80 from 64 s;
    # its knee is 64 s.
    rows = []
    for k in range(40):
        rows.append((k * 50, 'a', 'R', 1, 1))
        rows.append((k * 50 + 1, 'a', 'R', 1000 + k, 1))
    trace = write_csv(tmp_path / 't.csv', rows)
    doc = run_json(replay_bin, trace, '--profile-windows', '10,100,400,1000',
                   '--cache-size', '1M')
    assert [(p['window_s'], p['hit_ratio']) for p in doc['online_profile']] \
        == [(16, 0), (32, 0)] + [(w, 39 / 80) for w in (64, 128, 256, 512)]
    assert doc['online_knee_window_s'] == 64
    out, _ = run(replay_bin, trace, '--profile-windows', '10,100,400,1000',
                 '--cache-size', '1M')
    assert 'online (allocation_window = auto, from reuse times): ' \
        'window 64 s' in out

    # A trace shorter than three candidates: no online choice.
    short = write_csv(tmp_path / 's.csv', rows[:4])
    doc = run_json(replay_bin, short, '--profile-windows', '10,100,400,1000',
                   '--cache-size', '1M')
    assert doc['online_knee_window_s'] is None


@pytest.mark.parametrize('line,what', [
    ('1,a,R,0', 'expected 5 fields'),
    ('1,a,X,0,4096', "unknown op 'X'"),
    ('1,a,R,12a,4096', "bad offset '12a'"),
    ('1,a,R,0,-5', "bad length '-5'"),
    ('abc,a,R,0,4096', "bad time 'abc'"),
    ('1,,R,0,4096', 'empty volume id'),
    ('1,a,R,18446744073709551615,2', 'overflows'),
])
def test_bad_csv_lines(replay_bin, tmp_path, line, what):
    trace = tmp_path / 'bad.csv'
    trace.write_text('0,a,R,0,4096\n\n%s\n' % line)
    _, err = run(replay_bin, trace, '--cache-size', '1M', expect=2)
    assert err.startswith('fcache-replay: %s:3: ' % trace), err
    assert what in err
    assert len(err.strip().splitlines()) == 1


def test_header_only_on_the_first_line(replay_bin, tmp_path):
    trace = tmp_path / 'h.csv'
    trace.write_text('time,volume,op,offset,length\n0,a,read,0,4096\n'
                     '1,a,WRITE,0,4096\ntime,volume,op,offset,length\n')
    _, err = run(replay_bin, trace, '--cache-size', '1M', expect=2)
    assert ':4: bad time' in err


def test_truncated_oracle_record(replay_bin, tmp_path):
    trace = tmp_path / 't.oracleGeneral'
    trace.write_bytes(oracle_records([1, 2]) + b'\0' * 10)
    _, err = run(replay_bin, trace, '--cache-size', '1M', expect=2)
    assert '%s: record 3: truncated' % trace in err


@pytest.mark.parametrize('args,what', [
    (('--rws-n', '0'), '--rws-n'),
    (('--rws-n', '8'), '--rws-n'),
    (('--staging-fraction', '0.05'), '--staging-fraction'),
    (('--staging-fraction', '0.0001'), '--staging-fraction'),
    (('--window', '0'), '--window'),
    (('--window', '-3'), '--window'),
    (('--policy', 'fifo'), '--policy'),
    (('--staging', 'both'), '--staging'),
    (('--cache-size', '1X'), '--cache-size'),
    (('--cache-size', '100'), '--cache-size'),
    (('--profile-windows', '60'), 'at least two'),
    (('--profile-windows', '60,0'), '--profile-windows'),
])
def test_bad_arguments(replay_bin, tmp_path, args, what):
    trace = write_csv(tmp_path / 't.csv', SMALL)
    if '--cache-size' not in args:
        args = args + ('--cache-size', '1M')
    _, err = run(replay_bin, trace, *args, expect=2)
    assert what in err
    assert len(err.strip().splitlines()) == 1


def test_missing_or_unknown_trace(replay_bin, tmp_path):
    _, err = run(replay_bin, tmp_path / 'none.csv', '--cache-size', '1M',
                 expect=2)
    assert 'none.csv' in err
    other = tmp_path / 'trace.txt'
    other.write_text('')
    _, err = run(replay_bin, other, '--cache-size', '1M', expect=2)
    assert '--format' in err
