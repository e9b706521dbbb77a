# SPDX-License-Identifier: Apache-2.0
"""``fcache migrate``: its argument checks, help and --wait progress.

Two fake agents of conftest.py stand for the source and the destination;
the real agents' migrations are tested in tests/functional.
"""

import json
import os

import pytest

from nova_ext import cli
from tests.unit import conftest
from tests.unit import test_cli

MID = '4a6d1e1b9c2f4f0e8d7c6b5a49382716'
MiB = 1 << 20

run = test_cli.run


@pytest.fixture
def agents(short_tmpdir):
    pair = []
    for name in ('src', 'dst'):
        directory = os.path.join(short_tmpdir, name)
        os.mkdir(directory)
        agent = conftest.FakeAgent(directory)
        agent.start()
        pair.append(agent)
    yield pair
    for agent in pair:
        agent.stop()


def dst_status(state, done):
    return {'migration_id': MID, 'volume_id': 'v1', 'role': 'destination',
            'strategy': 'hybrid', 'state': state, 'blocks_total': 64,
            'blocks_done': done // (64 * 1024), 'bytes_total': 4 * MiB,
            'bytes_done': done, 'rate_bytes_per_s': 2.0 * MiB,
            'duration_s': 1.0, 'downtime_s': 0.0, 'invalidated_blocks': 0,
            'eta_s': 1.0, 'fetched_blocks': 3}


@pytest.fixture
def finishing(agents):
    """The destination reports 1, 2 then 4 MiB of 4 arrived."""
    src, dst = agents
    answers = [dst_status('transferring', MiB),
               dst_status('transferring', 2 * MiB),
               dst_status('completed', 4 * MiB)]

    def status(args):
        assert args['migration_id'] == MID
        return answers.pop(0) if len(answers) > 1 else answers[0]
    dst.handlers['migration-status'] = status
    dst.handlers['volume-show'] = lambda args: {'origin_read_bytes': 4096}
    src.handlers['migration-finish'] = lambda args: dict(
        dst_status('completed', 4 * MiB), role='source', downtime_s=0.25)
    return src, dst


def migrate(capsys, agents, *argv):
    src, dst = agents
    return run(capsys, 'migrate', 'v1', '--from', src.socket_path, '--to',
               dst.socket_path, *argv)


def test_finish_wait_shows_progress_on_stderr(capsys, finishing):
    status, out, err = migrate(capsys, finishing, '--migration', MID,
                               '--phase', 'finish', '--wait')
    assert status == 0
    assert err.splitlines() == [
        'finish, 1.0 MiB of 4.0 MiB (25.0%), transferring, 2.0 MiB/s, '
        'ETA 1 s',
        'finish, 2.0 MiB of 4.0 MiB (50.0%), transferring, 2.0 MiB/s, '
        'ETA 1 s',
        'finish, 4.0 MiB of 4.0 MiB (100.0%), completed, 2.0 MiB/s']
    rows = test_cli.table(out)
    assert rows['state'] == 'completed'
    assert rows['bytes_transferred'] == '4.0 MiB'
    assert list(rows)[:4] == ['migration_id', 'volume_id', 'strategy',
                              'state']


def test_finish_wait_json_lines(capsys, finishing):
    status, out, err = migrate(capsys, finishing, '--migration', MID,
                               '--phase', 'finish', '--wait', '--json')
    assert status == 0
    # stdout: the result alone, one object; stderr: the progress.
    assert json.loads(out)['bytes_transferred'] == 4 * MiB
    lines = [json.loads(line) for line in err.splitlines()]
    assert [(line['phase'], line['state']) for line in lines] == [
        ('finish', 'transferring'), ('finish', 'transferring'),
        ('finish', 'completed')]
    assert lines[0]['bytes_done'] == MiB


def test_finish_value_format(capsys, finishing):
    status, out, _ = migrate(capsys, finishing, '--migration', MID,
                             '--phase', 'finish', '--wait', '-f', 'value',
                             '-c', 'state', '-c', 'bytes_transferred')
    assert (status, out) == (0, 'completed\n%d\n' % (4 * MiB))


@pytest.mark.parametrize('argv, fragments', [
    (['--phase', 'start'],
     ['--migration MID is required', '--phase start needs the migration '
      'id printed by --phase prepare']),
    (['--phase', 'settle', '--source-lost'],
     ['--migration MID is required']),
    (['--migration', MID],
     ["invalid --migration '%s'" % MID, 'goes with --phase']),
    (['--migration', MID, '--phase', 'start', '--wait'],
     ['invalid --wait', 'not with --phase start']),
    (['--migration', MID, '--phase', 'finish', '--source-lost'],
     ['invalid --source-lost', 'goes with --phase settle only']),
    (['--migration', MID, '--phase', 'switchover', '--rate-limit', '10'],
     ['invalid --rate-limit', 'when the migration is prepared']),
    (['--timeout', '0'], ["argument --timeout: must be positive: '0'"]),
    (['--rate-limit', 'fast'], ["argument --rate-limit: not a number"]),
    (['--phase', 'teleport'], ['argument --phase: invalid choice']),
])
def test_bad_arguments(capsys, agents, argv, fragments):
    status, out, err = migrate(capsys, agents, *argv)
    assert (status, out) == (cli.EXIT_USAGE, '')
    test_cli.assert_one_line_error(err, *fragments)
    assert 'None' not in err
    assert agents[0].requests == agents[1].requests == []


@pytest.mark.parametrize('argv, fragment', [
    (['migrate', 'v1', '--to', 'b'],
     "--from SOCK is required: the source agent's control socket"),
    (['migrate', 'v1', '--migration', MID, '--phase', 'settle'],
     '--from SOCK or --to SOCK is required: the control socket of the '
     'agent on this host'),
    (['migrate', 'v1', '--from', 'a', '--migration', MID, '--phase',
      'settle', '--source-lost'],
     '--to SOCK is required: --source-lost is done by the destination'),
    (['migrate', 'v1', '--from', 'a'],
     "--to SOCK is required: the destination agent's control socket"),
    (['migrate', '--from', 'a', '--to', 'b'], 'required: ID'),
    (['migrate', 'v1', '--from', 'a', '--to', 'a'],
     "invalid --to 'a': the destination must be another agent"),
])
def test_missing_arguments(capsys, argv, fragment):
    status, out, err = run(capsys, *argv)
    assert (status, out) == (cli.EXIT_USAGE, '')
    test_cli.assert_one_line_error(err, 'migrate', fragment)


def test_settle_a_lost_source_needs_only_the_destination(capsys, agents):
    src, dst = agents
    dst.handlers['migration-settle'] = lambda args: {
        'mode': 'missing', 'given_up_blocks': 12}
    status, out, err = run(capsys, 'migrate', 'v1', '--to', dst.socket_path,
                           '--migration', MID, '--phase', 'settle',
                           '--source-lost', '-f', 'json')
    assert (status, err) == (0, '')
    assert json.loads(out) == {'mode': 'missing', 'blocks': 0,
                               'given_up_blocks': 12}
    assert dst.requests == [{'op': 'migration-settle', 'args': {
        'step': 'end', 'source': 'lost', 'migration_id': MID,
        'volume_id': 'v1'}}]
    assert src.requests == []


@pytest.mark.parametrize('here', ['--from', '--to'])
def test_settle_with_one_socket_asks_that_agent_alone(capsys, agents, here):
    src, dst = agents
    agent = src if here == '--from' else dst
    agent.handlers['migration-settle'] = lambda args: {
        'migration_id': MID, 'volume_id': 'v1', 'mode': 'held', 'blocks': 3,
        'given_up_blocks': 0,
        'settled_from': 'source' if agent is src else 'destination'}
    status, out, err = run(capsys, 'migrate', 'v1', here, agent.socket_path,
                           '--migration', MID, '--phase', 'settle',
                           '-f', 'json')
    assert (status, err) == (0, '')
    assert json.loads(out)['settled_from'] == (
        'source' if here == '--from' else 'destination')
    assert agent.requests == [{'op': 'migration-settle', 'args': {
        'step': 'all', 'migration_id': MID, 'volume_id': 'v1'}}]
    other = dst if agent is src else src
    assert other.requests == []


def test_help_explains_the_phases_and_settle(capsys):
    status, out, _ = run(capsys, 'migrate', '--help')
    assert status == 0
    for phase in ('prepare', 'start', 'switchover', 'finish', 'abort',
                  'settle'):
        assert '\n  %s ' % phase in out
    assert 'firepan copies the whole cache' in out
    assert '--source-lost: the source host is gone' in out
    assert '--phase settle --source-lost' in out
    assert 'with only that\n              host\'s socket' in out
