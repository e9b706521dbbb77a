# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the storage-move calls of nova_ext.agent.AgentClient.

The agent here is the fake of conftest.py answering with the JSON
fixtures of fixtures/volume_move.json (the control-socket contract of
volume-move, volume-move-status and volume-move-abort); the real agent's
side is tested with the agent.
"""

import json
import os

import pytest

from nova_ext import agent
from nova_ext import exception

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures',
                        'volume_move.json')


def load_fixtures():
    with open(FIXTURES) as f:
        return json.load(f)


@pytest.fixture
def answers():
    return load_fixtures()


@pytest.fixture
def client(fake_agent, answers):
    fake_agent.handlers['volume-move'] = lambda args: answers['move']
    fake_agent.handlers['volume-move-status'] = (
        lambda args: answers['copying'])
    fake_agent.handlers['volume-move-abort'] = (
        lambda args: answers['aborted'])
    return agent.AgentClient(fake_agent.socket_path, timeout=5)


def test_move_sends_only_given_arguments(client, fake_agent, answers):
    assert client.move_volume('v1', '/dev/ssd/v1') == answers['move']
    assert fake_agent.requests[-1] == {
        'op': 'volume-move', 'args': {'volume_id': 'v1',
                                      'to': '/dev/ssd/v1'}}


def test_move_all_arguments(client, fake_agent):
    client.move_volume('v1', 'nbd+unix:///?socket=/tmp/b.sock',
                       scheme='aio', max_rounds=30, converge_bytes=1 << 20,
                       aio_threshold=64, aio_delay_us=500,
                       rate_limit_mbps=12, downtime_ms=40)
    assert fake_agent.requests[-1]['args'] == {
        'volume_id': 'v1', 'to': 'nbd+unix:///?socket=/tmp/b.sock',
        'scheme': 'aio', 'max_rounds': 30, 'converge_bytes': 1 << 20,
        'aio_threshold': 64, 'aio_delay_us': 500, 'rate_limit_mbps': 12,
        'downtime_ms': 40}


@pytest.mark.parametrize('scheme', agent.MOVE_SCHEMES)
def test_move_every_scheme(client, fake_agent, scheme):
    client.move_volume('v1', '/dev/b', scheme=scheme)
    assert fake_agent.requests[-1]['args']['scheme'] == scheme


@pytest.mark.parametrize('kwargs', [
    {'volume_id': ''},
    {'to': ''},
    {'to': None},
    {'scheme': 'auto'},          # resolved by the caller, not the agent
    {'scheme': 'teleport'},
    {'max_rounds': 0},
    {'max_rounds': 1001},
    {'max_rounds': '3'},
    {'converge_bytes': 0},
    {'converge_bytes': True},
    {'downtime_ms': 0},
    {'downtime_ms': 60001},
    {'aio_threshold': 0},
    {'aio_delay_us': 2000000},
    {'rate_limit_mbps': 0},
    {'rate_limit_mbps': -1},
    {'rate_limit_mbps': float('nan')},
    {'rate_limit_mbps': 12.5},
    {'rate_limit_mbps': 1000001},
    {'converge_bytes': (1 << 40) + 1},
    {'aio_threshold': 1000001},
    {'rate_limit_mbps': False},
])
def test_move_invalid_arguments_send_nothing(client, fake_agent, kwargs):
    args = dict({'volume_id': 'v1', 'to': '/dev/b'}, **kwargs)
    with pytest.raises(exception.InvalidArgument) as info:
        client.move_volume(**args)
    name = list(kwargs)[0]
    assert name in str(info.value)
    assert fake_agent.requests == []


def test_move_status_and_abort(client, fake_agent, answers):
    status = client.move_status('v1')
    assert status == answers['copying']
    assert status['state'] in agent.MOVE_STATES
    assert fake_agent.requests[-1] == {'op': 'volume-move-status',
                                       'args': {'volume_id': 'v1'}}
    assert client.abort_move('v1')['state'] == 'aborted'
    assert fake_agent.requests[-1] == {'op': 'volume-move-abort',
                                       'args': {'volume_id': 'v1'}}


def test_status_abort_check_the_volume_id(client, fake_agent):
    for call in (client.move_status, client.abort_move):
        with pytest.raises(exception.InvalidArgument):
            call('')
    assert fake_agent.requests == []


def test_agent_refusal_is_an_agent_error(client, fake_agent):
    fake_agent.raw_reply = (b'{"ok": false, "error": "volume v1 has no '
                            b'storage move", "errno": 2}\n')
    with pytest.raises(exception.AgentError) as info:
        client.move_status('v1')
    assert info.value.errno == 2
    assert 'no storage move' in str(info.value)
