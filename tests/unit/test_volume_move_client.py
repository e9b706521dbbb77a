# SPDX-License-Identifier: Apache-2.0
"""Unit tests of nova_ext.volume_move: ``auto`` and following a storage move.

The agent is the fake of conftest.py answering with the JSON fixtures of
fixtures/volume_move.json; the clock is a counter so that timeouts take
no time.
"""

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


def test_engine_limits_the_schemes():
    # dmcache moves with dm-mirror (IO Mirroring) or dm-clone (LR): auto
    # weighs those two only, and another scheme is refused before the
    # agent sees it.
    for src, dst, gamma in (('ssd', 'hdd', 0.0), ('hdd', 'ssd', 1.0),
                            ('ssd', 'ssd', 0.5)):
        scheme, auto = volume_move.resolve_scheme('auto', src, dst, gamma,
                                                  engine='dmcache')
        assert scheme in ('mirror', 'lr')
        assert [c['scheme'] for c in auto['expected']] == ['mirror', 'lr']
    assert volume_move.resolve_scheme('mirror', 'ssd', 'hdd', 0.5,
                                      engine='dmcache') == ('mirror', None)
    with pytest.raises(exception.InvalidArgument) as exc:
        volume_move.resolve_scheme('dbt', 'ssd', 'hdd', 0.5,
                                   engine='dmcache')
    assert 'engine dmcache runs only mirror, lr' in str(exc.value)
    assert volume_move.resolve_scheme('aio', 'ssd', 'hdd', 0.5,
                                      engine='ucache') == ('aio', None)
