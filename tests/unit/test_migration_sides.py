# SPDX-License-Identifier: Apache-2.0
"""nova_ext.migration driven one host at a time (Nova's driver).

Each nova-compute talks only to its own agent: the source makes its key
pair for the migration (``migration_tls = pinned``), the destination
prepares its side, pinning the source's fingerprint, and hands migration
id, address, token and its own fingerprint to the source, which registers
(pinning that fingerprint), starts, switches over and finishes on its own
agent.  Scripted
agents record what each side was asked; the real agents run these calls
in tests/nova_functional/test_live_migration.py.
"""

import errno

import pytest

from nova_ext import exception
from nova_ext import migration


class RecordingAgent(object):

    def __init__(self, answers=None):
        self.calls = []
        self.answers = answers or {}

    def call(self, op, **args):
        self.calls.append((op, args))
        answer = self.answers.get(op, {})
        if isinstance(answer, list):
            answer = answer.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_destination_makes_the_token_and_only_the_destination_is_asked():
    dst = RecordingAgent({'migration-incoming': {
        'export_uri': 'nbd+unix:///?socket=/e.sock', 'listen': '0:7440'}})
    prepared = migration.prepare_destination(
        dst, 'vol1', 'hybrid', '/dev/sdb', 1 << 30, 'write_back', 'all')
    [(op, args)] = dst.calls
    assert op == 'migration-incoming'
    assert args['origin'] == '/dev/sdb'
    assert args['token'] == prepared['token']
    assert len(prepared['token']) == 64
    assert args['migration_id'] == prepared['migration_id']
    assert prepared['destination'] == '0:7440'
    assert prepared['export_uri'] == 'nbd+unix:///?socket=/e.sock'
    # No source fingerprint (an agent of another mode), none sent; an
    # agent of another mode returns none.
    assert 'peer_fingerprint' not in args
    assert prepared['fingerprint'] is None


def test_destination_attaches_with_the_source_admission():
    dst = RecordingAgent({'migration-incoming': {
        'export_uri': 'nbd+unix:///?socket=/e.sock', 'listen': '0:7440'}})
    migration.prepare_destination(
        dst, 'vol1', 'hybrid', '/dev/sdb', 1 << 30, 'write_back', 'rws',
        rws_n=2, staging='address')
    [(_, args)] = dst.calls
    assert (args['admission'], args['rws_n'], args['staging']) == (
        'rws', 2, 'address')


def test_destination_without_rws_params_leaves_them_to_its_agent():
    # A source host running an fcache from before on-demand allocation
    # describes no rws_n/staging: nothing is sent, nothing is null.
    dst = RecordingAgent({'migration-incoming': {
        'export_uri': 'nbd+unix:///?socket=/e.sock', 'listen': '0:7440'}})
    migration.prepare_destination(
        dst, 'vol1', 'hybrid', '/dev/sdb', 1 << 30, 'write_back', 'all')
    [(_, args)] = dst.calls
    assert 'rws_n' not in args
    assert 'staging' not in args
    assert args['admission'] == 'all'


# volume-show of the agent (the allocation object of the control protocol).
SHOWN_RWS = {
    'volume_id': 'vol1', 'origin': '/dev/sdb', 'cache_size': 4096,
    'write_policy': 'write_back', 'admission': 'rws', 'cached_blocks': 1,
    'dirty_blocks': 0, 'block_size': 4096,
    'allocation': {
        'share_bytes': 4096, 'used_bytes': 4096, 'limit_bytes': 4096,
        'rwss_observed_bytes': None, 'rwss_predicted_bytes': None,
        'prediction_error': None, 'window_s': 3600, 'rws_n': 3,
        'staging': {'kind': 'data', 'area_bytes': 1 << 20,
                    'used_bytes': 0, 'addresses': 0, 'data_blocks': 0,
                    'admitted': 0, 'data_hits': 0, 'evicted': 0}}}


@pytest.mark.parametrize('shown, expected', [
    (SHOWN_RWS, {'admission': 'rws', 'rws_n': 3, 'staging': 'data'}),
    # An agent from before on-demand allocation: what it runs.
    ({'write_policy': 'write_back'},
     {'admission': 'all', 'rws_n': 1, 'staging': 'hybrid'}),
    ({'admission': 'rws', 'allocation': {'rws_n': 2, 'staging': None}},
     {'admission': 'rws', 'rws_n': 2, 'staging': 'hybrid'}),
])
def test_admission_params_of_a_volume(shown, expected):
    assert migration.admission_params(shown) == expected


def test_prepare_both_sides_carries_admission_rws_n_and_staging():
    src = RecordingAgent({'volume-show': SHOWN_RWS})
    dst = RecordingAgent({'migration-incoming': {
        'export_uri': 'nbd+unix:///?socket=/e.sock', 'listen': 'h:1'}})
    src.show_volume = lambda vol: src.call('volume-show', volume_id=vol)
    migration.prepare(src, dst, 'vol1', 'firepan')
    [(op, args)] = dst.calls
    assert op == 'migration-incoming'
    assert {k: args[k] for k in ('origin', 'cache_size', 'write_policy',
                                 'admission', 'rws_n', 'staging')} == {
        'origin': '/dev/sdb', 'cache_size': 4096,
        'write_policy': 'write_back', 'admission': 'rws', 'rws_n': 3,
        'staging': 'data'}


def test_source_registers_with_the_destination_address_and_token():
    src = RecordingAgent()
    prepared = {'migration_id': 'm-1', 'volume_id': 'vol1',
                'strategy': 'cloudcache', 'token': 'ab' * 32,
                'destination': '10.0.0.2:7440'}
    migration.prepare_source(src, prepared, rate_limit_mbps=2.5)
    [(op, args)] = src.calls
    assert op == 'migration-outgoing'
    assert args == {'migration_id': 'm-1', 'volume_id': 'vol1',
                    'token': 'ab' * 32, 'strategy': 'cloudcache',
                    'destination': '10.0.0.2:7440',
                    'rate_limit_bps': 2500000}


def test_start_source_failure_aborts_the_source_side_only():
    src = RecordingAgent({'migration-start': exception.AgentError(
        'cannot connect to 10.0.0.2:7440', errno.ECONNREFUSED)})
    with pytest.raises(exception.AgentError):
        migration.start_source(src, 'm-1')
    assert [op for op, _ in src.calls] == ['migration-start',
                                           'migration-abort']


def test_finish_source_waits_on_the_source_agent():
    src = RecordingAgent({'migration-finish': {'state': 'completed',
                                               'bytes_done': 4096}})
    st = migration.finish_source(src, 'm-1', 'vol1', timeout_s=0.2)
    assert st['bytes_done'] == 4096
    assert src.calls == [('migration-finish',
                          {'migration_id': 'm-1', 'timeout_s': 1})]


def test_finish_source_failure_names_migration_volume_and_reason():
    src = RecordingAgent({'migration-finish': exception.AgentError(
        'migration m-1 is failed: destination lost', errno.EIO)})
    with pytest.raises(exception.MigrationFailed) as exc:
        migration.finish_source(src, 'm-1', 'vol1')
    assert str(exc.value) == ('cache migration m-1 of volume vol1 failed in '
                              'phase finish: migration m-1 is failed: '
                              'destination lost')


def test_prepare_both_sides_hides_the_token():
    src = RecordingAgent({'volume-show': {
        'origin': '/dev/sdb', 'cache_size': 4096, 'write_policy':
        'write_back', 'cached_blocks': 1, 'dirty_blocks': 0,
        'block_size': 4096}})
    dst = RecordingAgent({'migration-incoming': {
        'export_uri': 'nbd+unix:///?socket=/e.sock', 'listen': 'h:1'}})
    src.show_volume = lambda vol: src.call('volume-show', volume_id=vol)
    prepared = migration.prepare(src, dst, 'vol1', 'firepan')
    assert 'token' not in prepared
    assert prepared['reason'] == 'requested'
    token = dst.calls[0][1]['token']
    assert src.calls[-1][1]['token'] == token


FP_SRC = '5a' * 32
FP_DST = 'd0' * 32


def test_source_key_is_made_on_the_source_under_a_new_migration_id():
    src = RecordingAgent({'migration-key': {'fingerprint': FP_SRC}})
    key = migration.prepare_key(src, 'vol1')
    [(op, args)] = src.calls
    assert op == 'migration-key'
    assert args == {'migration_id': key['migration_id'], 'volume_id': 'vol1'}
    assert key['fingerprint'] == FP_SRC
    assert migration.prepare_key(src, 'vol1', 'm-7')['migration_id'] == 'm-7'


def test_source_agent_of_another_mode_gives_no_fingerprint():
    src = RecordingAgent({'migration-key': {'tls': 'psk'}})
    assert migration.prepare_key(src, 'vol1')['fingerprint'] is None


def test_source_agent_older_than_pinned_gives_no_fingerprint():
    src = RecordingAgent({'migration-key': exception.AgentError(
        "unknown operation 'migration-key'", errno.EOPNOTSUPP)})
    assert migration.prepare_key(src, 'vol1')['fingerprint'] is None


def test_source_key_failure_is_raised():
    src = RecordingAgent({'migration-key': exception.AgentError(
        'cannot make the migration\'s key pair', errno.EIO)})
    with pytest.raises(exception.AgentError):
        migration.prepare_key(src, 'vol1')


def test_destination_pins_the_source_and_returns_its_fingerprint():
    dst = RecordingAgent({'migration-incoming': {
        'export_uri': 'nbd+unix:///?socket=/e.sock', 'listen': '0:7440',
        'fingerprint': FP_DST}})
    prepared = migration.prepare_destination(
        dst, 'vol1', 'hybrid', '/dev/sdb', 1 << 30, 'write_back', 'all',
        migration_id='m-1', source_fingerprint=FP_SRC)
    [(_, args)] = dst.calls
    assert args['peer_fingerprint'] == FP_SRC
    assert args['migration_id'] == 'm-1'
    assert prepared['fingerprint'] == FP_DST


def test_source_pins_the_destination_fingerprint():
    src = RecordingAgent()
    prepared = {'migration_id': 'm-1', 'volume_id': 'vol1',
                'strategy': 'hybrid', 'token': 'ab' * 32,
                'destination': '10.0.0.2:7440', 'fingerprint': FP_DST}
    migration.prepare_source(src, prepared)
    [(_, args)] = src.calls
    assert args['peer_fingerprint'] == FP_DST


def test_prepare_both_sides_pins_each_agent_to_the_other():
    src = RecordingAgent({'volume-show': SHOWN_RWS,
                          'migration-key': {'fingerprint': FP_SRC}})
    dst = RecordingAgent({'migration-incoming': {
        'export_uri': 'nbd+unix:///?socket=/e.sock', 'listen': 'h:1',
        'fingerprint': FP_DST}})
    src.show_volume = lambda vol: src.call('volume-show', volume_id=vol)
    prepared = migration.prepare(src, dst, 'vol1', 'firepan')
    ops = [op for op, _ in src.calls]
    assert ops == ['volume-show', 'migration-key', 'migration-outgoing']
    key_args, out_args = src.calls[1][1], src.calls[2][1]
    [(_, in_args)] = dst.calls
    mid = prepared['migration_id']
    assert key_args['migration_id'] == in_args['migration_id'] == mid
    assert out_args['migration_id'] == mid
    assert in_args['peer_fingerprint'] == FP_SRC
    assert out_args['peer_fingerprint'] == FP_DST


class Busy(RecordingAgent):
    """Refuses to settle (EBUSY) ``busy`` times, then lists nothing."""

    def __init__(self, busy):
        super().__init__()
        self.busy = busy

    def call(self, op, **args):
        self.calls.append((op, args))
        if self.busy:
            self.busy -= 1
            raise exception.AgentError('migration m-1 is switched: it has '
                                       'not failed', errno.EBUSY)
        if args['step'] == 'list':
            return {'mode': 'missing', 'blocks': [], 'more': False}
        if args['step'] == 'end':
            return {'mode': 'missing', 'given_up_blocks': 0}
        return {}


def test_settle_failed_waits_for_the_other_side_to_see_the_failure(
        monkeypatch):
    monkeypatch.setattr(migration.time, 'sleep', lambda s: None)
    src, dst = Busy(0), Busy(3)
    res = migration.settle_failed(src, dst, 'm-1', 'vol1', wait_s=5)
    assert res == {'mode': 'missing', 'blocks': 0, 'given_up_blocks': 0}
    assert [a['step'] for _, a in dst.calls] == ['list'] * 4 + ['end']


def test_settle_failed_gives_up_after_wait_s(monkeypatch):
    clock = iter(range(0, 1000))
    monkeypatch.setattr(migration.time, 'monotonic', lambda: next(clock))
    monkeypatch.setattr(migration.time, 'sleep', lambda s: None)
    with pytest.raises(exception.AgentError) as exc:
        migration.settle_failed(Busy(0), Busy(100), 'm-1', 'vol1', wait_s=3)
    assert exc.value.errno == errno.EBUSY


def test_settle_failed_does_not_retry_other_errors(monkeypatch):
    dst = RecordingAgent({'migration-settle': exception.AgentError(
        'volume vol1 is not attached to this agent', errno.ENOENT)})
    with pytest.raises(exception.AgentError):
        migration.settle_failed(RecordingAgent(), dst, 'm-1', 'vol1')
    assert len(dst.calls) == 1


class BusyThrough(RecordingAgent):
    """Refuses step=all (EBUSY) ``busy`` times, then settles."""

    def __init__(self, busy):
        super().__init__()
        self.busy = busy

    def call(self, op, **args):
        self.calls.append((op, args))
        if self.busy:
            self.busy -= 1
            raise exception.AgentError('migration m-1 is switched: it has '
                                       'not failed', errno.EBUSY)
        return {'mode': 'held', 'blocks': 2, 'given_up_blocks': 0,
                'settled_from': 'source'}


def test_settle_through_asks_one_agent_for_every_step(monkeypatch):
    monkeypatch.setattr(migration.time, 'sleep', lambda s: None)
    here = BusyThrough(2)
    res = migration.settle_through_failed(here, 'm-1', 'vol1', wait_s=5)
    assert res['settled_from'] == 'source' and res['mode'] == 'held'
    assert here.calls == [('migration-settle', {
        'step': 'all', 'migration_id': 'm-1', 'volume_id': 'vol1'})] * 3


def test_settle_through_does_not_retry_an_old_peer(monkeypatch):
    here = RecordingAgent({'migration-settle': exception.AgentError(
        'migration m-1 was run with an agent that predates settling '
        'through the agents', errno.ENOKEY)})
    with pytest.raises(exception.AgentError) as exc:
        migration.settle_through_failed(here, 'm-1', 'vol1')
    assert exc.value.errno == errno.ENOKEY
    assert len(here.calls) == 1
