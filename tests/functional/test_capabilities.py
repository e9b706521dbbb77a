# SPDX-License-Identifier: Apache-2.0
"""capabilities: the agent's vocabulary equals nova_ext.vocabulary's.

The agent publishes the names it parses with (strategies from their
descriptors, write policies, admissions, staging kinds), the storage move
schemes its engine runs and the bounds it enforces; nova_ext.vocabulary
states the same for the hosts without an agent (cinder_ext on the Cinder
API).  A strategy or scheme added on one side only fails here.  What the
agent says it supports, it runs: each strategy listed as supported
migrates a volume here, and every name it lists is one volume-attach and
the volume-move request take (the kernel engine's answers are checked in
test_dmcache_uml.py).
"""

import errno
import json
import subprocess

import pytest

from nova_ext import control_schema
from nova_ext import exception
from nova_ext import migration
from nova_ext import vocabulary

from fcache_testkit import harness
from fcache_testkit import migration_util as mu

from .test_cli import ok_json

MiB = 1 << 20


def test_the_agent_publishes_the_python_vocabulary(make_agent):
    caps = make_agent(cache_size='8M').start().client().capabilities()
    assert caps['engine'] == 'ucache'
    assert tuple(s['name'] for s in caps['strategies']) == \
        vocabulary.STRATEGIES
    assert tuple(caps['write_policies']) == vocabulary.WRITE_POLICIES
    assert tuple(caps['admissions']) == vocabulary.ADMISSIONS
    assert tuple(caps['staging_kinds']) == vocabulary.STAGING_KINDS
    assert tuple(caps['move_schemes']) == vocabulary.MOVE_SCHEMES
    assert caps['bounds'] == {'rws_n_max': vocabulary.RWS_N_MAX,
                              'rws_window_max_s':
                                  vocabulary.RWS_WINDOW_MAX_S}
    # The user-space engine runs every strategy.
    for s in caps['strategies']:
        assert s['supported'] is True and 'why_not' not in s, s
        assert s['summary'], s


def test_the_bounds_it_publishes_are_enforced(make_agent, make_origin):
    agent = make_agent(cache_size='8M').start()
    c = agent.client(unchecked=True)
    bounds = c.capabilities()['bounds']
    origin = make_origin(4 * MiB)
    for vid, kw in (('n', {'rws_n': bounds['rws_n_max'] + 1}),
                    ('w', {'rws_window_s': bounds['rws_window_max_s'] + 1})):
        with pytest.raises(exception.AgentError):
            c.call('volume-attach', volume_id=vid, origin=origin.uri,
                   cache_size=MiB, admission='rws', **kw)
    c.call('volume-attach', volume_id='ok', origin=origin.uri,
           cache_size=MiB, admission='rws', rws_n=bounds['rws_n_max'],
           rws_window_s=bounds['rws_window_max_s'])


@pytest.mark.parametrize('strategy', vocabulary.STRATEGIES)
def test_every_strategy_it_lists_migrates(make_agent, make_origin, strategy):
    src, dst = mu.agent_pair(make_agent, cache_size='8M')
    origin = make_origin(2 * MiB)
    src.attach('v', origin.uri, cache_size=MiB)
    s, d = src.client(timeout=60), dst.client(timeout=60)
    p = migration.prepare(s, d, 'v', strategy)
    migration.start(s, d, p['migration_id'])
    migration.switchover(s, d, p['migration_id'])
    res = migration.finish(s, d, p['migration_id'], timeout_s=60)
    assert res['state'] == 'completed', (res, mu.log_excerpt(dst))
    assert res['strategy'] == strategy


def test_cli_lists_the_strategies(make_agent):
    agent = make_agent(cache_size='8M').start()
    rows = ok_json(['--socket', agent.control_socket, 'capabilities',
                    '-f', 'json'])
    assert [r['name'] for r in rows] == list(vocabulary.STRATEGIES)
    assert all(r['supported'] for r in rows), rows


def test_nova_ext_copy_of_the_operations_is_the_agents(make_agent):
    """nova_ext.control_schema is the running agent's table.

    The Python client checks requests against that copy: it is what the
    agent publishes and what ``fcache-agent --control-schema`` prints.
    """
    agent = make_agent(cache_size='8M').start()
    published = agent.client().capabilities()['operations']
    printed = json.loads(subprocess.run(
        [harness.ASAN_AGENT, '--control-schema'], check=True,
        stdout=subprocess.PIPE).stdout)
    assert published == printed == control_schema.OPERATIONS


def test_the_agent_refuses_what_the_table_refuses(make_agent, make_origin):
    """Each kind of mismatch is refused by the agent itself.

    Sent past nova_ext's check, each gets EINVAL naming the argument, and
    nothing is attached.
    """
    agent = make_agent(cache_size='8M').start()
    origin = make_origin(MiB)
    c = agent.client(unchecked=True)
    for args, says in (
            ({'origin': origin.uri}, "missing argument 'volume_id'"),
            ({'volume_id': 'v', 'origin': origin.uri, 'cache_sise': MiB},
             "'volume-attach' takes no argument 'cache_sise'"),
            ({'volume_id': 'v', 'origin': origin.uri, 'cache_size': 0},
             "'cache_size' of 'volume-attach' must be a positive size"),
            ({'volume_id': 'v', 'origin': origin.uri, 'rws_n': '2'},
             "'rws_n' of 'volume-attach' must be an integer from 1 to")):
        with pytest.raises(exception.AgentError) as ei:
            c.call('volume-attach', **args)
        assert ei.value.errno == errno.EINVAL
        assert says in ei.value.error, ei.value.error
    assert c.list_volumes()['volumes'] == []
