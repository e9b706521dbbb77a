# SPDX-License-Identifier: Apache-2.0
"""The allocation evaluation, CI-sized (bench/allocation.py --quick).

The same traces go through fcache-replay and, for plain LRU, through
libCacheSim (its PyPI build, a peer written by others): the hit ratios
must agree within 1 %.  On the generated traces with backup scans, RWSS_1
must use less cache and write less to flash than WSS: the direction of
the paper's Figure 8 (its magnitudes are reported in
doc/research/allocation-eval.rst, not asserted).
"""

import pytest

from bench import allocation

from .test_replay import replay_bin  # noqa: F401  (the fixture)


@pytest.fixture(scope='module')
def quick_results(replay_bin):  # noqa: F811
    args = allocation.build_parser().parse_args(
        ['--quick', '--replay', replay_bin])
    return allocation.evaluate(args)


def test_lru_agrees_with_libcachesim(quick_results):
    peer = quick_results['lru_peer']
    assert 'error' not in peer, peer
    assert peer['rows']
    for row in peer['rows']:
        assert row['agree'], row
        assert abs(row['replay_hit_ratio'] - row['libcachesim_hit_ratio']) \
            <= 0.01 * row['libcachesim_hit_ratio'] + 1e-9, row


@pytest.mark.parametrize('trace', ['web', 'mix'])
def test_rwss1_uses_less_cache_and_flash_than_wss(quick_results, trace):
    fig8 = quick_results['traces'][trace]['fig8']
    claim = quick_results['traces'][trace]['claim']
    assert claim['usage_cut_pct'] > 0, claim
    assert claim['flash_write_cut_pct'] > 0, claim
    # Admit-all without allocation keeps the most; RWSS_2 admits less
    # than RWSS_1.
    assert fig8['RWSS_2']['flash_write_ratio'] <= \
        fig8['RWSS_1']['flash_write_ratio'], fig8
