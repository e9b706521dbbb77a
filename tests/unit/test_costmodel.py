"""The ``auto`` strategy's cost model (nova_ext.costmodel)."""

import pytest

from nova_ext import costmodel

MB = 1000 * 1000


def vol(cached_blocks, dirty_blocks=0, block_size=4096):
    return {'cached_blocks': cached_blocks, 'dirty_blocks': dirty_blocks,
            'block_size': block_size}


def test_nothing_cached_moves_nothing():
    assert costmodel.choose_strategy(vol(0))[0] == 'none'


def test_small_cache_is_copied_while_paused():
    # 4 MiB over 1 GB/s is 4 ms of downtime.
    strategy, reason = costmodel.choose_strategy(vol(1024), link_bps=1000 * MB)
    assert strategy == 'firepan'
    assert 'downtime' in reason


def test_firepan_threshold_follows_max_downtime():
    v = vol(256 * 1024)     # 1 GiB
    assert costmodel.choose_strategy(v, link_bps=1000 * MB)[0] != 'firepan'
    assert costmodel.choose_strategy(v, link_bps=1000 * MB,
                                     max_downtime_s=2.0)[0] == 'firepan'


def test_fast_link_prefers_hybrid():
    v = vol(256 * 1024, dirty_blocks=1000)
    assert costmodel.choose_strategy(v, link_bps=1000 * MB,
                                     origin_bps=200 * MB)[0] == 'hybrid'


@pytest.mark.parametrize('dirty,expected', [(0, 'cachemior'),
                                            (10, 'cloudcache')])
def test_slow_link(dirty, expected):
    v = vol(256 * 1024, dirty_blocks=dirty)
    assert costmodel.choose_strategy(v, link_bps=50 * MB,
                                     origin_bps=200 * MB)[0] == expected


def test_every_choice_is_a_strategy_the_agent_knows():
    for cached in (0, 10, 10 ** 6):
        for link in (10 * MB, 10 ** 4 * MB):
            s, _ = costmodel.choose_strategy(vol(cached, cached // 2),
                                             link_bps=link)
            assert s in costmodel.STRATEGIES
