# SPDX-License-Identifier: Apache-2.0
"""Unit tests of ``fcache volume-move``, ``volume-move-status`` and
``volume-move-abort``: parsing, ``auto``, progress and rendering.

The agent is the fake of conftest.py answering with the JSON fixtures of
fixtures/volume_move.json (the control-socket contract); the real agent's
moves are tested with the agent.
"""

import io
import json
import re

import pytest

from nova_ext import cli
from nova_ext.commands import progress
from nova_ext.commands import storage_move
from tests.unit import test_agent_move


def run(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def answers():
    return test_agent_move.load_fixtures()


@pytest.fixture
def sock(fake_agent, answers):
    fake_agent.handlers['volume-move'] = lambda args: dict(
        answers['move'], scheme=args.get('scheme'))
    fake_agent.handlers['volume-move-status'] = (
        lambda args: answers['copying'])
    fake_agent.handlers['volume-move-abort'] = (
        lambda args: answers['aborted'])
    return fake_agent.socket_path


def sequence(fake_agent, answers, *states):
    """The status polls answer ``states`` in turn, the last one after."""
    states = list(states)

    def status(args):
        return answers[states.pop(0) if len(states) > 1 else states[0]]
    fake_agent.handlers['volume-move-status'] = status


def test_move_given_scheme_json(capsys, sock, fake_agent):
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/ssd/v1', '--scheme', 'lr',
                           '--rate-limit', '50', '--json')
    assert (status, err) == (0, '')
    assert out.count('\n') == 1
    assert json.loads(out) == {'volume_id': 'v1', 'scheme': 'lr',
                               'state': 'copying'}
    assert fake_agent.requests[-1] == {
        'op': 'volume-move',
        'args': {'volume_id': 'v1', 'to': '/dev/ssd/v1', 'scheme': 'lr',
                 'rate_limit_mbps': 50}}


@pytest.mark.parametrize('src,dst,gamma,scheme', [
    ('hdd', 'ssd', '0.5', 'lr'),      # §7.3.1: LR whatever gamma
    ('ssd', 'hdd', '0.1', 'aio'),     # §7.3.2: I/O performance first
    ('ssd', 'hdd', '0.9', 'lr'),      # §7.3.2: SSD lifetime first
])
def test_move_auto_resolved_before_the_request(capsys, sock, fake_agent,
                                               src, dst, gamma, scheme):
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/b', '--scheme', 'auto',
                           '--from-medium', src, '--to-medium', dst,
                           '--wear-weight', gamma, '--json')
    assert (status, err) == (0, '')
    assert fake_agent.requests[-1]['args']['scheme'] == scheme
    result = json.loads(out)
    assert result['auto']['chosen'] == scheme
    assert [c['scheme'] for c in result['auto']['expected']] == [
        'dbt', 'mirror', 'lr', 'slr', 'aio']
    chosen = [c for c in result['auto']['expected']
              if c['scheme'] == scheme][0]
    assert chosen['mc'] == min(c['mc'] for c in result['auto']['expected']
                               if c['mc'] is not None)


def test_move_takes_the_schemes_the_agent_runs(capsys, sock, fake_agent):
    # A dmcache agent lists mirror and lr: auto weighs those two, and
    # another scheme is refused before any move is asked for.
    fake_agent.handlers['capabilities'] = lambda args: {
        'engine': 'dmcache', 'move_schemes': ['mirror', 'lr']}
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/b', '--from-medium', 'ssd',
                           '--to-medium', 'hdd', '--json')
    assert (status, err) == (0, '')
    result = json.loads(out)
    assert [c['scheme'] for c in result['auto']['expected']] == [
        'mirror', 'lr']
    assert fake_agent.requests[-1]['args']['scheme'] == \
        result['auto']['chosen']
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/b', '--scheme', 'dbt')
    assert status == cli.EXIT_USAGE
    assert ('the agent at %s runs only mirror, lr: name one of them or '
            'auto' % sock) in err
    assert fake_agent.requests[-1]['op'] == 'capabilities'
    assert [r['op'] for r in fake_agent.requests].count('volume-move') == 1


def test_move_auto_uses_the_given_rates(capsys, sock, fake_agent):
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/b', '--from-medium', 'ssd',
                           '--to-medium', 'hdd', '--write-rate', '40',
                           '--json')
    assert (status, err) == (0, '')
    assert fake_agent.requests[-1]['args']['scheme'] == 'slr'
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/b', '--from-medium', 'ssd',
                           '--to-medium', 'hdd', '--write-rate', '1',
                           '--json')
    assert fake_agent.requests[-1]['args']['scheme'] == 'lr'
    # A VM that waits for each request waits for SLR's writes to the HDD.
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/b', '--from-medium', 'ssd',
                           '--to-medium', 'hdd', '--in-flight', '1',
                           '--json')
    assert (status, err) == (0, '')
    assert fake_agent.requests[-1]['args']['scheme'] == 'aio'


def test_move_auto_human_shows_the_expected_costs(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/b', '--from-medium', 'hdd',
                           '--to-medium', 'ssd')
    assert (status, err) == (0, '')
    assert 'auto: lr (from hdd to ssd, wear weight 0.5)' in out
    assert 'lr *' in out
    assert 'expected_mc' in out


def test_move_wait_json_lines(capsys, sock, fake_agent, answers):
    sequence(fake_agent, answers, 'copying', 'switching', 'done')
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/ssd/v1', '--scheme', 'lr', '--wait',
                           '--interval', '0.01', '--json')
    assert (status, err) == (0, '')
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line['state'] for line in lines] == [
        'copying', 'switching', 'done', 'done']
    assert lines[-1] == answers['done']


def test_move_wait_human_lines_off_a_terminal(capsys, sock, fake_agent,
                                              answers):
    sequence(fake_agent, answers, 'copying', 'copying', 'done')
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/ssd/v1', '--scheme', 'lr', '--wait',
                           '--interval', '0.01')
    assert status == 0
    # Progress on stderr, the result alone on stdout; the same progress
    # twice is shown once.
    assert err.splitlines() == [
        'lr copying, 2.5 GiB of 10.0 GiB (25.0%), round 1, ETA 30 s',
        'lr done, 10.0 GiB of 10.0 GiB (100.0%), round 1, downtime 197 ms']
    lines = out.splitlines()
    assert lines[0] == err.splitlines()[1]   # the final status's summary
    assert 'io.vm_write_bytes' in out


def test_progress_bar_on_a_terminal(answers):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    display = progress.Progress(stream)
    show = storage_move.MoveProgress(display)
    show(answers['copying'])
    show(answers['done'])
    display.close()
    text = stream.getvalue()
    # rich's bar, redrawn in place: the phase, the bytes, the detail.
    assert '\r' in text or '\x1b[' in text
    plain = re.sub(r'\x1b\[[0-9;?]*[A-Za-z]', '', text)
    assert 'lr copying' in plain and 'round 1' in plain
    assert 'lr done' in plain and '10.0/10.0 GiB' in plain
    assert '2.5/10.0 GiB' in plain and ' 0.0/10.0' not in plain
    assert plain.endswith('\n')


def test_move_wait_failed(capsys, sock, fake_agent, answers):
    sequence(fake_agent, answers, 'failed')
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/hdd/v1', '--scheme', 'dbt_capped',
                           '--wait', '--interval', '0.01')
    assert status == cli.EXIT_FAILED
    # The progress shown, then one error line.
    progress_line, error = err.splitlines()
    assert progress_line.startswith('dbt_capped failed, ')
    assert error.startswith('fcache: error: storage move of volume v1 to '
                            '/dev/hdd/v1 ended failed: dbt_capped did not '
                            'converge')


def test_move_wait_timeout_leaves_the_move_running(capsys, sock,
                                                   fake_agent):
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', '/dev/ssd/v1', '--scheme', 'lr', '--wait',
                           '--interval', '0.01', '--timeout', '0.05')
    assert status == cli.EXIT_FAILED
    assert 'still copying after 0.05 s' in err
    assert 'fcache volume-move-abort v1' in err
    assert 'volume-move-abort' not in [r['op'] for r in fake_agent.requests]


def test_status_human(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-move-status',
                           'v1')
    assert (status, err) == (0, '')
    first, rest = out.split('\n', 1)
    assert first.startswith('lr copying, 2.5 GiB of 10.0 GiB (25.0%)')
    assert 'bytes_copied' in rest and 'io.b_write_bytes' in rest


def test_status_measured_cost(capsys, sock, fake_agent, answers):
    sequence(fake_agent, answers, 'done')
    # HDD to SSD in 40.5 s against a 20.25 s plain copy: lambda_time 2.
    # B got 11140071424 bytes, the copy's 10737418240 and 402653184 more:
    # all the VM wrote, lambda_wear 1.  The VM moved 4194304 read and
    # 402653184 written bytes in 40.5 s, 10.045617 MB/s, half of a best
    # of 20.091235 MB/s: lambda_io 0.5.  MC = 2 * (0.5*1 + 0.5*0.5) = 1.5.
    best = 2 * (4194304 + 402653184) / 40.5 / 1e6
    status, out, err = run(capsys, '--socket', sock, 'volume-move-status',
                           'v1', '--baseline-copy-s', '20.25',
                           '--from-medium', 'hdd', '--to-medium', 'ssd',
                           '--best-io', repr(best), '--json')
    assert (status, err) == (0, '')
    cost = json.loads(out)['cost']
    assert cost['scheme'] == 'lr'
    assert cost['lambda_time'] == pytest.approx(2.0)
    assert cost['lambda_wear'] == pytest.approx(1.0)
    assert cost['lambda_io'] == pytest.approx(0.5)
    assert cost['mc'] == pytest.approx(1.5)


def test_status_no_cost_before_done(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-move-status',
                           'v1', '--baseline-copy-s', '20', '--json')
    assert (status, err) == (0, '')
    assert 'cost' not in json.loads(out)


def test_abort(capsys, sock, fake_agent):
    status, out, err = run(capsys, '--socket', sock, 'volume-move-abort',
                           'v1')
    assert (status, err) == (0, '')
    assert out.startswith('storage move of volume v1 aborted; the old '
                          'origin keeps serving it\n')
    assert fake_agent.requests[-1] == {'op': 'volume-move-abort',
                                       'args': {'volume_id': 'v1'}}


@pytest.mark.parametrize('argv,fragment', [
    (['volume-move', 'v1', '--scheme', 'lr'], '--to'),
    (['volume-move', 'v1', '--to', 'x', '--scheme', 'teleport'],
     '--scheme'),
    (['volume-move', 'v1', '--to', 'x', '--wear-weight', '1.5'],
     'from 0 to 1'),
    (['volume-move', 'v1', '--to', 'x', '--from-medium', 'nvme'],
     '--from-medium'),
    (['volume-move', 'v1', '--to', 'x', '--timeout', '0'], 'positive'),
    (['volume-move', 'v1', '--to', 'x', '--max-rounds', 'many'],
     'not a number'),
    (['volume-move-status'], 'ID'),
])
def test_usage_errors(capsys, sock, fake_agent, argv, fragment):
    status, out, err = run(capsys, '--socket', sock, *argv)
    assert status == cli.EXIT_USAGE
    assert err.startswith('fcache: error: volume-move')
    assert err.count('\n') == 1 and fragment in err
    assert fake_agent.requests == []


def test_agent_refuses_an_out_of_range_option(capsys, sock, fake_agent):
    # 2000 rounds parse, but the client refuses them before sending.
    status, out, err = run(capsys, '--socket', sock, 'volume-move', 'v1',
                           '--to', 'x', '--scheme', 'dbt', '--max-rounds',
                           '2000')
    assert status == cli.EXIT_USAGE
    # Named as the operator typed it.
    assert "invalid --max-rounds 2000" in err
    # The agent was only asked which schemes it runs.
    assert [r['op'] for r in fake_agent.requests] == ['capabilities']


@pytest.mark.parametrize('seconds,text', [
    (0.4, '0 s'), (59.6, '1 min 00 s'), (61, '1 min 01 s'),
    (7260, '2 h 01 min')])
def test_format_seconds(seconds, text):
    assert storage_move.format_seconds(seconds) == text
