# SPDX-License-Identifier: Apache-2.0
"""The testbed report's model column (tools/fcdemo/report.py).

The VM's read MB/s during the copy as FirepanIF's Eq. 3 predicts it,
next to the measured one: from a committed result (no benchmark run),
whose records predate the flash probe and the hit counts, and from a
record that has them.
"""

import os

import pytest

from nova_ext import contention
from tests.unit import tool_module

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, 'doc', 'results', 'testbed-4x-20261127',
                       'results.json')


TB = tool_module.load('testbed_cli', 'testbed.py')
from fcdemo import report  # noqa: E402  (on sys.path through testbed.py)


@pytest.fixture(scope='module')
def committed():
    res, cfg = TB.reload(RESULTS)
    return {r['strategy']: r for r in res['rows']}, cfg


def test_committed_firepan_if_is_storage_bound(committed):
    rows, cfg = committed
    r = rows['firepan_if']
    # Its VM reads the storage until the copy completes (H = 0): the
    # model is the least of its fair share of the storage (the target and
    # one neighbour per host: 3 VMs) and its own rate before it had a
    # cache.
    share = cfg.storage_bytes_per_s / 3 / 1e6
    assert r['copy_model_mbps'] == pytest.approx(
        min(share, r['nocache_mbps']))
    assert r['copy_hit_ratio'] == 0.0
    assert r['copy_vm_mbps'] > 0
    assert 'S_k %.2f' % r['nocache_mbps'] in r['copy_model_note']


def test_committed_rows_say_what_was_not_recorded(committed):
    rows, _ = committed
    assert rows['none']['copy_model_note'] == 'no copy'
    assert rows['firepan']['copy_model_mbps'] == 0.0
    for st in ('hybrid', 'cloudcache', 'cachemior', 'auto'):
        assert rows[st]['copy_model_mbps'] is None
        assert rows[st]['copy_model_note'] == \
            'n/a: not recorded (H, F_k)'


def test_table_prints_prediction_next_to_measurement(committed):
    rows, _ = committed
    text = report.model_table(list(rows.values()))
    line = next(x for x in text.splitlines() if ' firepan_if ' in x)
    r = rows['firepan_if']
    assert '%.2f' % r['copy_vm_mbps'] in line
    assert '%.2f' % r['copy_model_mbps'] in line
    assert 'n/a: not recorded' in text


def _record(strategy, samples, flash):
    # Just what metrics() reads: 10 s of a steady VM, a 2 s copy.
    ser = [{'t': t + 0.5, 'read_mbps': 6.0, 'write_mbps': 1.0,
            'read_iops': 1500, 'write_iops': 250, 'state': 'running'}
           for t in range(-20, 10)]
    vol = {'cached_blocks': 100, 'block_size': 4096,
           'origin_read_bytes': 0, 'cache_write_bytes': 0}
    return {'strategy': strategy, 'resolved': strategy, 'cache_size': 1 << 26,
            'run': 0, 'vm_series': ser, 't_pause': 100.0, 't_attach': 90.0,
            't_start': 85.0, 'src_at_switch': vol, 'dst_at_end': vol,
            'vm_at_switch': {'reads': 0}, 'vm_final': {
                'reads': 1000, 'mismatches': 0, 'errors': 0},
            'downtime_ms': 50, 'migration_s': 2.5, 'dst_samples': samples,
            'migration': {'duration_s': 2.0, 'bytes_transferred': 40e6,
                          'blocks_transferred': 9766},
            'neighbours': {}, 'flash': flash}


def test_recorded_hit_ratio_and_flash_rate_give_a_prediction():
    cfg = TB.T.Config(storage_rate='64M', neighbours=1)
    samples = [(0.1, 100, 0, 'switched', 60),
               (2.0, 1000, 4096 * 200, 'completed', 750)]
    flash = {'host': 'host-b', 'vm_flash_bps': 30e6, 'hit_ratio': 1.0}
    m = report.metrics(_record('hybrid', samples, flash), cfg)
    assert m['copy_hit_ratio'] == 0.75
    expect = contention.vm_rate(
        0.75, 30e6, 6e6, vms_on_flash=2,
        storage=cfg.storage_bytes_per_s, vms_on_storage=3, copy=20e6) / 1e6
    assert m['copy_model_mbps'] == pytest.approx(expect)
    # 0.75 x 30 from the cache, 0.25 x 6 from the storage (under its
    # fair share of 2.8): the copy has its own link and the cache file no
    # limit, so it does not lower the prediction.
    assert expect == pytest.approx(22.5 + 1.5)
    assert m['copy_vm_mbps'] == 6.0
    # Without the flash probe only the rate is missing.
    m = report.metrics(_record('hybrid', samples, None), cfg)
    assert m['copy_model_note'] == 'n/a: not recorded (F_k)'


def test_cachemior_warmer_is_one_more_sharer_of_the_storage():
    cfg = TB.T.Config(storage_rate='64M', neighbours=1)
    samples = [(2.0, 1000, 0, 'completed', 0)]
    m = report.metrics(_record('cachemior', samples,
                               {'vm_flash_bps': 30e6}), cfg)
    assert m['copy_model_mbps'] == pytest.approx(
        cfg.storage_bytes_per_s / 4 / 1e6)
