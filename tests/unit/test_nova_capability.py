# SPDX-License-Identifier: Apache-2.0
"""nova_ext.virt.capability: which destinations may take a volume's cache."""

import pytest

from nova_ext import exception
from nova_ext.virt import capability

MiB = 1 << 20


def _source(write_policy, strategy='firepan', cache_size=16 * MiB,
            cached=True):
    return {'cached': cached, 'write_policy': write_policy,
            'strategy': strategy, 'cache_size': cache_size}


UCACHE = {'host': 'cmp2', 'engine': 'ucache', 'capacity_bytes': 64 * MiB,
          'free_bytes': None, 'version': '1'}
DMCACHE = {'host': 'cmp3', 'engine': 'dmcache', 'capacity_bytes': 64 * MiB,
           'free_bytes': 20 * MiB, 'version': '1'}


class Agent(object):

    def __init__(self, status=None, error=None):
        self._status = status
        self._error = error

    def status(self):
        if self._error:
            raise self._error
        return self._status


def test_write_back_needs_an_fcache_destination():
    refused = capability.refusal('vol-1', _source('write_back'), None, {})
    assert refused.startswith('write_back volume vol-1 may hold dirty '
                              'blocks only in this host\'s cache')
    assert 'does not run fcache\'s driver' in refused
    assert 'detach the volume first' in refused


@pytest.mark.parametrize('write_policy', ['read_only', 'write_through'])
def test_nothing_dirty_migrates_uncached(write_policy):
    assert capability.refusal('vol-1', _source(write_policy), None,
                              {}) is None


def test_not_cached_here_goes_anywhere():
    assert capability.refusal('vol-1', _source('write_back', cached=False),
                              None, {}) is None
    assert capability.refusal('vol-1', {'cached': False}, None, {}) is None


@pytest.mark.parametrize('write_policy', ['read_only', 'write_through',
                                          'write_back'])
def test_an_fcache_destination_with_room_takes_it(write_policy):
    assert capability.refusal('vol-1', _source(write_policy), UCACHE,
                              {}) is None


@pytest.mark.parametrize('strategy', ['cloudcache', 'hybrid'])
def test_on_demand_strategies_need_ucache_there(strategy):
    refused = capability.refusal('vol-1', _source('write_through', strategy),
                                 DMCACHE, {'free_bytes': 20 * MiB})
    assert 'strategy %s' % strategy in refused
    assert 'cmp3 runs engine dmcache' in refused
    assert capability.refusal('vol-1', _source('write_through', strategy),
                              UCACHE, {}) is None


def test_a_cache_larger_than_the_destination_device():
    refused = capability.refusal('vol-1', _source('write_back',
                                                  cache_size=128 * MiB),
                                 UCACHE, {})
    assert '134217728 bytes' in refused
    assert 'cmp2 has 67108864 bytes of cache in all' in refused


def test_dmcache_flash_is_shared_by_the_instance_volumes():
    room = {'free_bytes': 20 * MiB}
    assert capability.refusal('vol-1', _source('write_back'), DMCACHE,
                              room) is None
    assert room == {'free_bytes': 4 * MiB}
    refused = capability.refusal('vol-2', _source('write_back'), DMCACHE,
                                 room)
    assert 'vol-2 (write_back)' in refused
    assert '4194304 bytes of flash free' in refused


def test_describe_when_the_agent_answers():
    agent = Agent({'version': '1.2', 'engine': 'ucache',
                   'capacity_bytes': 64 * MiB, 'used_bytes': 0,
                   'volumes': []})
    assert capability.describe(agent, 'cmp2') == {
        'host': 'cmp2', 'version': '1.2', 'engine': 'ucache',
        'capacity_bytes': 64 * MiB, 'free_bytes': None}


def test_no_description_when_the_agent_does_not_answer():
    agent = Agent(error=exception.AgentUnreachable(path='/x.sock',
                                                   reason='ENOENT'))
    assert capability.describe(agent, 'cmp2') is None


def test_auto_avoids_on_demand_strategies_for_a_dmcache_destination():
    vol = {'engine': 'ucache', 'cached_blocks': 10}
    assert capability.engine_view(vol, DMCACHE)['engine'] == 'dmcache'
    assert capability.engine_view(vol, UCACHE) is vol
    assert capability.engine_view(vol, None) is vol
