# SPDX-License-Identifier: Apache-2.0
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


@pytest.mark.parametrize('dirty,ucache_choice,dmcache_choice', (
    (0, 'hybrid', 'firepan_if'),
    (1024, 'hybrid', 'firepan_if'),
))
def test_dmcache_never_gets_an_on_demand_strategy_fast_link(
        dirty, ucache_choice, dmcache_choice):
    v = vol(256 * 1024, dirty)
    assert costmodel.choose_strategy(v)[0] == ucache_choice
    strategy, reason = costmodel.choose_strategy(dict(v, engine='dmcache'))
    assert strategy == dmcache_choice
    assert 'dmcache' in reason


def test_dmcache_never_gets_an_on_demand_strategy_slow_link():
    v = vol(256 * 1024, 1024)
    slow = dict(link_bps=10 * MB, origin_bps=100 * MB)
    assert costmodel.choose_strategy(v, **slow)[0] == 'cloudcache'
    strategy, reason = costmodel.choose_strategy(dict(v, engine='dmcache'),
                                                 **slow)
    assert strategy == 'cachemior'
    assert 'cannot fetch on demand' in reason
    # Strategies dmcache runs are kept as they are.
    assert costmodel.choose_strategy(dict(vol(1024), engine='dmcache'),
                                     link_bps=1000 * MB)[0] == 'firepan'


@pytest.mark.parametrize('strategy,expected', [
    ('firepan', 0.0),               # paused for the copy
    ('hybrid', 500 * MB),           # its fetches share the link's limit
    ('cachemior', 100 * MB),        # its warmer shares the storage
    ('firepan_if', 200 * MB),       # the copy is not on the VM's path
    ('cloudcache', 200 * MB),
    ('none', 200 * MB),
])
def test_vm_rate_during_copy(strategy, expected):
    assert costmodel.vm_rate_during_copy(
        strategy, 1000 * MB, 200 * MB) == pytest.approx(expected)


@pytest.mark.parametrize('link_mb,origin_mb', [
    (200, 200), (199, 200), (201, 200), (50, 200), (1000, 200), (10, 100),
    (20, 4.2), (40, 8.4), (80, 16.8)])
def test_contention_model_keeps_the_link_versus_storage_rule(link_mb,
                                                             origin_mb):
    # Before the model, auto took hybrid exactly when link >= origin (for
    # a cache too large for firepan's downtime); the model's comparison
    # (the VM's rate during the copy) keeps that, at the boundary too.
    v = vol(256 * 1024)
    strategy, reason = costmodel.choose_strategy(
        v, link_bps=link_mb * MB, origin_bps=origin_mb * MB)
    assert (strategy == 'hybrid') == (link_mb >= origin_mb)
    if strategy == 'hybrid':
        assert 'during the copy' in reason
