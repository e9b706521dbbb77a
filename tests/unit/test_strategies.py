# SPDX-License-Identifier: Apache-2.0
"""nova_ext.strategies: the stevedore plugins."""

import pytest

from nova_ext import exception
from nova_ext import strategies
from nova_ext.strategies import base


BUILTIN = ('none', 'cachemior', 'firepan', 'firepan_if', 'cloudcache',
           'hybrid', 'auto')


@pytest.mark.parametrize('name', BUILTIN)
def test_builtin_plugins_load_and_run_their_agent_strategy(name):
    plugin = strategies.load(name)
    assert isinstance(plugin, base.Strategy)
    assert plugin.agent_strategy({'strategy': name}, {}) == name
    assert plugin.agent_strategy({}, {}) in base.AGENT_STRATEGIES


def test_all_builtins_are_registered():
    assert set(BUILTIN) <= set(strategies.names())


def test_unknown_plugin_is_a_clear_error():
    with pytest.raises(exception.InvalidArgument) as err:
        strategies.load('warp')
    assert "'warp'" in str(err.value)
    assert 'fcache.strategies' in str(err.value)
    assert 'hybrid' in str(err.value)


def test_rate_limit_comes_from_policy():
    plugin = strategies.load('hybrid')
    assert plugin.rate_limit_mbps({'rate_limit': 200.0}) == 200.0
    assert plugin.rate_limit_mbps({'rate_limit': 0.0}) is None


def test_a_plugin_must_implement_agent_strategy():
    class Incomplete(base.Strategy):
        pass
    with pytest.raises(TypeError):
        Incomplete()
