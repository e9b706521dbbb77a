# SPDX-License-Identifier: Apache-2.0
"""Unit tests of nova_ext.agent.AgentClient against the fake agent.

These check the client side of the control protocol (framing, size
limits, error mapping) with the in-process fake of conftest.py; the real
agent is covered by tests/functional.
"""

import errno
import os
import socket
import threading
import time

import pytest

from nova_ext import agent
from nova_ext import exception


@pytest.fixture
def client(fake_agent):
    return agent.AgentClient(fake_agent.socket_path, timeout=5)


def test_status(client, fake_agent):
    result = client.status()
    assert result['engine'] == 'ucache'
    assert result['volumes'] == []
    assert fake_agent.requests == [{'op': 'agent-status', 'args': {}}]


def test_attach_sends_only_given_arguments(client, fake_agent):
    result = client.attach_volume('v1', '/dev/sdb')
    assert result == {
        'volume_id': 'v1',
        'export_uri': 'nbd+unix:///?socket=/run/fcache/exports/v1.sock'}
    assert fake_agent.requests[-1] == {
        'op': 'volume-attach',
        'args': {'volume_id': 'v1', 'origin': '/dev/sdb'}}


def test_attach_all_arguments(client, fake_agent):
    client.attach_volume('v1', 'nbd+unix:///?socket=/tmp/o.sock',
                         cache_size=10 << 20, write_policy='write_back',
                         admission='rws', rws_n=2, staging='address')
    assert fake_agent.requests[-1]['args'] == {
        'volume_id': 'v1', 'origin': 'nbd+unix:///?socket=/tmp/o.sock',
        'cache_size': 10 << 20, 'write_policy': 'write_back',
        'admission': 'rws', 'rws_n': 2, 'staging': 'address'}


@pytest.mark.parametrize('rws_n', [1, 7])
@pytest.mark.parametrize('staging', ['address', 'data', 'hybrid'])
def test_attach_rws_bounds_and_staging_kinds(client, fake_agent, rws_n,
                                             staging):
    client.attach_volume('v1', '/dev/sdb', admission='rws', rws_n=rws_n,
                         staging=staging)
    args = fake_agent.requests[-1]['args']
    assert (args['rws_n'], args['staging']) == (rws_n, staging)


def test_allocation(client, fake_agent):
    client.attach_volume('v1', '/dev/sdb', admission='rws', rws_n=2)
    result = client.allocation()
    assert fake_agent.requests[-1] == {'op': 'allocation', 'args': {}}
    assert result['mode'] == 'rwss'
    [vol] = result['volumes']
    assert vol['id'] == 'v1'
    assert vol['rws_n'] == 2


@pytest.mark.parametrize('kwargs', [
    {'volume_id': ''},
    {'origin': ''},
    {'cache_size': 0},
    {'cache_size': -1},
    {'cache_size': '10M'},
    {'cache_size': True},
    {'write_policy': 'write_around'},
    {'admission': 'some'},
    {'rws_n': 0},
    {'rws_n': 8},
    {'rws_n': '2'},
    {'rws_n': 2.0},
    {'rws_n': True},
    {'staging': 'lru'},
    {'staging': ''},
])
def test_attach_invalid_arguments_send_nothing(client, fake_agent, kwargs):
    call = {'volume_id': 'v1', 'origin': '/dev/sdb'}
    call.update(kwargs)
    with pytest.raises(exception.InvalidArgument):
        client.attach_volume(**call)
    assert fake_agent.requests == []


def test_show_list_detach(client, fake_agent):
    client.attach_volume('v1', '/dev/sdb')
    show = client.show_volume('v1')
    for key in ('reads', 'writes', 'read_hits', 'read_misses', 'hit_ratio',
                'cached_blocks', 'dirty_blocks', 'origin_read_bytes',
                'origin_write_bytes', 'cache_write_bytes', 'block_size'):
        assert key in show
    assert [v['volume_id'] for v in client.list_volumes()['volumes']] == [
        'v1']
    assert client.detach_volume('v1') == {'volume_id': 'v1'}
    assert client.list_volumes() == {'volumes': []}
    assert [r['op'] for r in fake_agent.requests] == [
        'volume-attach', 'volume-show', 'volume-list', 'volume-detach',
        'volume-list']


def test_detach_discard_and_claim(client, fake_agent):
    fake_agent.handlers['volume-claim'] = lambda args: {
        'volume_id': args['volume_id'], 'writeback_was_held': True}
    client.attach_volume('v1', '/dev/sdb')
    assert client.claim_volume('v1') == {'volume_id': 'v1',
                                         'writeback_was_held': True}
    assert client.detach_volume('v1', discard_dirty=True) == {
        'volume_id': 'v1', 'dirty_blocks_dropped': 3}
    # Only a discard says so: a plain detach sends what it always sent.
    client.attach_volume('v1', '/dev/sdb')
    client.detach_volume('v1')
    sent = [(r['op'], r.get('args')) for r in fake_agent.requests
            if r['op'] in ('volume-claim', 'volume-detach')]
    assert sent == [
        ('volume-claim', {'volume_id': 'v1'}),
        ('volume-detach', {'volume_id': 'v1', 'discard_dirty': True}),
        ('volume-detach', {'volume_id': 'v1'})]


def test_set_volume(client, fake_agent):
    fake_agent.handlers['volume-set'] = lambda args: dict(args)
    assert client.set_volume('v1', write_policy='read_only') == {
        'volume_id': 'v1', 'write_policy': 'read_only'}
    assert client.set_volume('v1', cache_size=1 << 20) == {
        'volume_id': 'v1', 'cache_size': 1 << 20}


@pytest.mark.parametrize('kwargs', [
    {},
    {'volume_id': '', 'write_policy': 'read_only'},
    {'write_policy': 'write_around'},
    {'cache_size': 0},
    {'cache_size': '1M'},
    {'cache_size': True},
])
def test_set_volume_invalid_arguments_send_nothing(client, fake_agent,
                                                   kwargs):
    call = {'volume_id': 'v1'}
    call.update(kwargs)
    with pytest.raises(exception.InvalidArgument):
        client.set_volume(**call)
    assert fake_agent.requests == []


def test_generic_call(client, fake_agent):
    fake_agent.handlers['volume-hint'] = lambda args: {'echo': args}
    assert client.call('volume-hint', volume_id='v', strategy='firepan',
                       ttl_s=60) == {'echo': {'volume_id': 'v',
                                              'strategy': 'firepan',
                                              'ttl_s': 60}}


# Requests are checked against the agent's table (nova_ext.control_schema)
# before they are sent: each of these would be refused by the agent.
@pytest.mark.parametrize('op, args, says', [
    ('volume-show', {}, 'volume_id of volume-show is required'),
    ('volume-show', {'volume_id': 7}, 'must be a string'),
    ('volume-show', {'volume_id': 'v', 'force': True},
     "invalid argument of volume-show 'force': the agent takes only "
     "volume_id"),
    ('volume-hint', {'volume_id': 'v', 'strategy': 'x', 'ttl_s': 0},
     'must be an integer from 1 to 86400'),
    ('volume-hint', {'volume_id': 'v', 'strategy': 'x', 'ttl_s': True},
     'must be an integer'),
    ('volume-detach', {'volume_id': 'v', 'discard_dirty': 'yes'},
     'must be true or false'),
    ('volume-set', {'volume_id': 'v', 'cache_size': -1},
     'must be a positive number of bytes'),
    ('migration-settle', {'step': 'drop', 'migration_id': 'm',
                          'volume_id': 'v', 'blocks': [1, -2]},
     'must be a list of integers from 0 to'),
    ('agent-status', {'verbose': True}, 'the agent takes only no arguments'),
    ('echo', {}, "invalid operation 'echo': the agent has no such"),
])
def test_request_the_agent_would_refuse_is_not_sent(client, fake_agent, op,
                                                    args, says):
    with pytest.raises(exception.InvalidArgument) as info:
        client.call(op, **args)
    assert says in str(info.value)
    assert fake_agent.requests == []


def test_none_is_an_absent_argument(client, fake_agent):
    fake_agent.handlers['volume-detach'] = lambda args: args
    assert client.call('volume-detach', volume_id='v',
                       discard_dirty=None) == {'volume_id': 'v',
                                               'discard_dirty': None}


def test_agent_error(client):
    with pytest.raises(exception.AgentError) as info:
        client.show_volume('nope')
    assert info.value.error == 'volume nope is not attached'
    assert info.value.errno == 2
    assert str(info.value) == ('volume nope is not attached '
                               '(agent errno 2 ENOENT)')


def test_agent_error_without_message(client, fake_agent):
    fake_agent.raw_reply = b'{"ok": false}\n'
    with pytest.raises(exception.AgentError) as info:
        client.status()
    assert info.value.errno is None
    assert 'without a message' in str(info.value)


def test_busy_agent_is_asked_again(client, fake_agent):
    # Refused before the request was read: the same request goes again.
    fake_agent.busy = 3
    assert client.status()['engine'] == 'ucache'
    assert [r['op'] for r in fake_agent.requests] == ['agent-status'] * 4


def test_busy_agent_past_the_timeout(fake_agent):
    fake_agent.busy = 1000
    client = agent.AgentClient(fake_agent.socket_path, timeout=0.5)
    started = time.monotonic()
    with pytest.raises(exception.AgentError) as info:
        client.status()
    assert time.monotonic() - started < 2
    assert info.value.errno == errno.EAGAIN
    assert 'too many control connections' in info.value.error


def test_error_with_eagain_is_not_repeated(client, fake_agent):
    # Only a refusal marked busy is safe to repeat: an operation that
    # failed with EAGAIN may have done part of its work.
    fake_agent.raw_reply = (b'{"ok": false, "error": "try later", '
                            b'"errno": 11}\n')
    with pytest.raises(exception.AgentError) as info:
        client.status()
    assert info.value.errno == errno.EAGAIN
    assert len(fake_agent.requests) == 1


def test_missing_result_is_empty(client, fake_agent):
    fake_agent.raw_reply = b'{"ok": true}\n'
    assert client.status() == {}


def test_unreachable_no_socket(short_tmpdir):
    path = os.path.join(short_tmpdir, 'missing.sock')
    client = agent.AgentClient(path, timeout=5)
    with pytest.raises(exception.AgentUnreachable) as info:
        client.status()
    message = str(info.value)
    assert path in message
    assert 'no such socket' in message
    assert 'fcache-agent' in message
    assert '\n' not in message


def test_unreachable_refused(short_tmpdir):
    # A socket file nobody listens on: what a crashed agent leaves.
    path = os.path.join(short_tmpdir, 'stale.sock')
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()
    with pytest.raises(exception.AgentUnreachable) as info:
        agent.AgentClient(path, timeout=5).status()
    assert 'connection refused' in str(info.value)


def test_timeout(short_tmpdir):
    path = os.path.join(short_tmpdir, 'silent.sock')
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    try:
        with pytest.raises(exception.AgentTimeout) as info:
            agent.AgentClient(path, timeout=0.2).status()
        assert 'agent-status' in str(info.value)
    finally:
        listener.close()


@pytest.mark.parametrize('reply, reason', [
    (b'this is not json\n', 'not valid JSON'),
    (b'\xff\xfe\n', 'not valid JSON'),
    (b'[1, 2]\n', 'not a JSON object'),
    (b'{"result": {}}\n', 'no boolean "ok"'),
    (b'{"ok": 1, "result": {}}\n', 'no boolean "ok"'),
    (b'{"ok": true, "result": [1]}\n', '"result" is not a JSON object'),
    (b'{"ok": true, "result": {}', 'before the end of the response'),
    (b'', 'without a response'),
])
def test_garbled_response(client, fake_agent, reply, reason):
    fake_agent.raw_reply = reply
    with pytest.raises(exception.ProtocolError) as info:
        client.status()
    assert reason in str(info.value)
    assert fake_agent.socket_path in str(info.value)


def test_large_response_within_limit(client, fake_agent):
    blob = 'x' * (4 * 1024 * 1024)
    fake_agent.handlers['agent-status'] = lambda args: {'blob': blob}
    assert client.call('agent-status') == {'blob': blob}


def test_oversized_response(client, fake_agent):
    fake_agent.raw_reply = b'{"ok": true, "result": {"x": "' + (
        b'y' * agent.MAX_RESPONSE_BYTES) + b'"}}\n'
    with pytest.raises(exception.ProtocolError) as info:
        client.status()
    assert 'larger than 16777216 bytes' in str(info.value)


def test_oversized_request_is_not_sent(client, fake_agent):
    with pytest.raises(exception.InvalidArgument):
        client.attach_volume('v1', '/dev/' + 'x' * agent.MAX_REQUEST_BYTES)
    assert fake_agent.requests == []


def test_one_connection_per_request_is_thread_safe(client, fake_agent):
    errors = []

    def worker():
        try:
            for _ in range(20):
                client.status()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert len(fake_agent.requests) == 80
