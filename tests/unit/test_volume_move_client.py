# SPDX-License-Identifier: Apache-2.0
"""Unit tests of nova_ext.volume_move: ``auto`` and following a storage move.

The agent is the fake of conftest.py answering with the JSON fixtures of
fixtures/volume_move.json; the clock is a counter so that timeouts take
no time.
"""

import sys

import pytest

from nova_ext import agent
from nova_ext import exception
from nova_ext import volume_move
from tests.unit import test_agent_move


@pytest.fixture
def answers():
    return test_agent_move.load_fixtures()


@pytest.fixture
def client(fake_agent, answers):
    fake_agent.handlers['volume-move-status'] = (
        lambda args: answers['copying'])
    fake_agent.handlers['volume-move-abort'] = (
        lambda args: answers['aborted'])
    return agent.AgentClient(fake_agent.socket_path, timeout=5)


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_resolve_given_scheme_is_kept():
    assert volume_move.resolve_scheme('dbt', 'ssd', 'hdd', 0.5) == \
        ('dbt', None)


def test_resolve_auto():
    scheme, auto = volume_move.resolve_scheme('auto', 'hdd', 'ssd', 0.3)
    assert scheme == 'lr' == auto['chosen']
    assert (auto['from_medium'], auto['to_medium'],
            auto['wear_weight']) == ('hdd', 'ssd', 0.3)
    assert len(auto['expected']) == 5


@pytest.mark.parametrize('args', [
    ('teleport', 'ssd', 'hdd', 0.5),
    ('auto', 'nvme', 'hdd', 0.5),
    ('auto', 'ssd', 'hdd', 2.0),
])
def test_resolve_refuses(args):
    with pytest.raises(exception.InvalidArgument):
        volume_move.resolve_scheme(*args)


def test_wait_until_done(client, fake_agent, answers):
    states = ['copying', 'switching', 'done']
    fake_agent.handlers['volume-move-status'] = (
        lambda args: answers[states.pop(0)])
    seen = []
    clock = Clock()
    status = volume_move.wait(client, 'v1', '/dev/ssd/v1', 60, poll_s=2,
                              progress=seen.append, clock=clock,
                              sleep=clock.sleep)
    assert status == answers['done']
    assert [s['state'] for s in seen] == ['copying', 'switching', 'done']
    assert clock.now == 4


def test_wait_timeout_aborts_when_asked(client, fake_agent):
    clock = Clock()
    with pytest.raises(exception.StorageMoveTimeout) as info:
        volume_move.wait(client, 'v1', '/dev/ssd/v1', 5, poll_s=2,
                         abort_on_timeout=True, clock=clock, sleep=clock.sleep)
    assert 'still copying after 5 s' in str(info.value)
    assert 'aborted and the old origin keeps serving' in str(info.value)
    ops = [r['op'] for r in fake_agent.requests]
    # Polls at 0, 2, 4 and 5 s, then the abort.
    assert ops == ['volume-move-status'] * 4 + ['volume-move-abort']


def test_wait_aborted_by_someone_else(client, fake_agent, answers):
    fake_agent.handlers['volume-move-status'] = (
        lambda args: answers['aborted'])
    with pytest.raises(exception.StorageMoveFailed) as info:
        volume_move.wait(client, 'v1', '/dev/b', 5)
    assert 'ended aborted: the agent gave no reason' in str(info.value)


def test_assumed_workload():
    wl = volume_move.assumed_workload()
    assert (wl.write_bps, wl.read_bps) == (10e6, 30e6)
    wl = volume_move.assumed_workload(write_mbps=4, ssd_mbps=500)
    assert (wl.write_bps, wl.read_bps) == (4e6, 12e6)
    assert wl.bandwidth_bps == {'ssd': 500e6, 'hdd': 95e6}
    with pytest.raises(exception.InvalidArgument):
        volume_move.assumed_workload(write_mbps=-1)


def test_auto_follows_the_workload_and_bandwidths():
    # SSD to HDD at gamma 0.5: SLR for the assumed VM (10 MB/s of writes,
    # 4 requests in flight), the paper's choice for this weight (§5.3,
    # §7.3.2); LR for one that writes 1 MB/s, whose writes cost the HDD
    # little time; AIO for one that waits for each request, which then
    # waits for SLR's writes to the HDD one by one.
    assert volume_move.resolve_scheme('auto', 'ssd', 'hdd', 0.5)[0] == 'slr'
    light = volume_move.assumed_workload(write_mbps=1)
    assert volume_move.resolve_scheme('auto', 'ssd', 'hdd', 0.5,
                                      light)[0] == 'lr'
    serial = volume_move.assumed_workload(depth=1)
    assert serial.depth == 1
    assert volume_move.resolve_scheme('auto', 'ssd', 'hdd', 0.5,
                                      serial)[0] == 'aio'


DMCACHE_SCHEMES = ['mirror', 'lr']


def test_the_agent_s_schemes_limit_the_choice():
    # dmcache's agent lists mirror (dm-mirror) and lr (dm-clone): auto
    # weighs those two only, and another scheme is refused before the
    # agent sees it, naming the agent and what it runs.
    for src, dst, gamma in (('ssd', 'hdd', 0.0), ('hdd', 'ssd', 1.0),
                            ('ssd', 'ssd', 0.5)):
        scheme, auto = volume_move.resolve_scheme(
            'auto', src, dst, gamma, schemes=DMCACHE_SCHEMES)
        assert scheme in DMCACHE_SCHEMES
        assert [c['scheme'] for c in auto['expected']] == DMCACHE_SCHEMES
    # Where the choice among all is SLR, it is the cheaper of the two the
    # agent runs, by the costs of the unrestricted choice.
    best, every = volume_move.resolve_scheme('auto', 'ssd', 'hdd', 0.5)
    assert best == 'slr'
    mc = dict((c['scheme'], c['mc']) for c in every['expected'])
    assert volume_move.resolve_scheme(
        'auto', 'ssd', 'hdd', 0.5, schemes=DMCACHE_SCHEMES)[0] == \
        min(DMCACHE_SCHEMES, key=mc.get)
    assert volume_move.resolve_scheme(
        'mirror', 'ssd', 'hdd', 0.5,
        schemes=DMCACHE_SCHEMES) == ('mirror', None)
    with pytest.raises(exception.InvalidArgument) as exc:
        volume_move.resolve_scheme('dbt', 'ssd', 'hdd', 0.5,
                                   schemes=DMCACHE_SCHEMES,
                                   agent_name='the fcache agent on cmp3')
    assert ('the fcache agent on cmp3 runs only mirror, lr: name one of '
            'them or auto') in str(exc.value)
    # No list: every scheme, the agent refusing one it cannot run.
    assert volume_move.resolve_scheme('aio', 'ssd', 'hdd', 0.5) == \
        ('aio', None)
    with pytest.raises(exception.InvalidArgument) as exc:
        volume_move.resolve_scheme('auto', 'ssd', 'hdd', 0.5, schemes=[])
    assert 'the agent runs no storage move' in str(exc.value)


def test_agent_schemes_from_its_capabilities(fake_agent):
    client = agent.AgentClient(fake_agent.socket_path, timeout=5)
    fake_agent.handlers['capabilities'] = lambda args: {
        'engine': 'dmcache', 'move_schemes': DMCACHE_SCHEMES}
    assert volume_move.agent_schemes(client) == ('mirror', 'lr')
    # An agent too old to report them: the full list, and the agent
    # refuses what its engine does not run.
    fake_agent.handlers['capabilities'] = lambda args: {'engine': 'ucache'}
    assert volume_move.agent_schemes(client) == agent.MOVE_SCHEMES
    # One older still has no capabilities operation (EOPNOTSUPP).
    del fake_agent.handlers['capabilities']
    assert volume_move.agent_schemes(client) == agent.MOVE_SCHEMES
    assert [r['op'] for r in fake_agent.requests] == ['capabilities'] * 3


def test_agent_schemes_other_errors_are_raised(fake_agent):
    # The fake's own error class (conftest.py, as pytest imported it).
    fake_error = sys.modules[type(fake_agent).__module__].FakeAgentError

    def refuse(args):
        raise fake_error('not allowed for uid 1000', 1)
    fake_agent.handlers['capabilities'] = refuse
    client = agent.AgentClient(fake_agent.socket_path, timeout=5)
    with pytest.raises(exception.AgentError) as exc:
        volume_move.agent_schemes(client)
    assert 'not allowed for uid 1000' in str(exc.value)
