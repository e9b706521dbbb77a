# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the ``fcache`` command line against the fake agent.

They run nova_ext.cli.main() in-process (plus one real subprocess) and
check output, exit status and the one-line error contract of
doc/cli/fcache.rst ("Exit status").  The agent here is the fake of conftest.py;
the real agent is covered by tests/functional.
"""

import json
import os
import subprocess
import sys

import pytest

from nova_ext import agent
from nova_ext import cli
from nova_ext.commands import volume
from nova_ext.commands import volume_set
from nova_ext import units


def run(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line_error(err, *fragments):
    assert err.startswith('fcache: error: ')
    assert err.endswith('\n')
    assert err.count('\n') == 1
    for fragment in fragments:
        assert fragment in err


def grid(out):
    """Parse a bordered table (cliff's) into a header and rows of cells."""
    lines = [line for line in out.splitlines() if line.startswith('|')]
    cells = [[cell.strip() for cell in line.strip('|').split('|')]
             for line in lines]
    return cells[0], cells[1:]


def tables(out):
    """The bordered tables of ``out``, each as its text (three borders)."""
    found, lines, borders = [], [], 0
    for line in out.splitlines(True):
        if not lines and not line.startswith('+'):
            continue
        lines.append(line)
        borders += line.startswith('+')
        if borders == 3:
            found.append(''.join(lines))
            lines, borders = [], 0
    return found


def listing(out):
    """A bordered listing as a list of dicts."""
    header, rows = grid(out)
    return [dict(zip(header, row)) for row in rows]


def table(out):
    """Parse a Field/Value table into a dict of strings."""
    header, rows = grid(out)
    assert header == ['Field', 'Value']
    return dict(rows)


@pytest.fixture
def sock(fake_agent):
    return fake_agent.socket_path


# -- agent-status ---------------------------------------------------------

def test_agent_status_json(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'agent-status',
                           '--json')
    assert (status, err) == (0, '')
    assert json.loads(out) == {'version': '0.1.0', 'engine': 'ucache',
                               'capacity_bytes': 1 << 30, 'used_bytes': 0,
                               'volumes': [],
                               'allocation': {
                                   'mode': 'rwss', 'spare': 'proportional',
                                   'window_s': 3600, 'headroom': 0.1,
                                   'capacity_bytes': 1 << 30,
                                   'volumes': []}}


def test_agent_status_human(capsys, sock, fake_agent):
    fake_agent.volumes['v1'] = {'cache_size': 1 << 20}
    status, out, err = run(capsys, '--socket', sock, 'agent-status')
    assert (status, err) == (0, '')
    rows = table(out)
    # Every size humanised alike; the exact bytes are in -f json.
    assert rows == {'version': '0.1.0', 'engine': 'ucache',
                    'capacity_bytes': '1.0 GiB',
                    'used_bytes': '1.0 MiB',
                    'volumes': 'v1',
                    # The allocation summary; the shares are in
                    # "fcache allocation".
                    'allocation.mode': 'rwss',
                    'allocation.spare': 'proportional',
                    'allocation.window_s': '3600',
                    'allocation.headroom': '0.1',
                    'allocation.capacity_bytes': '1.0 GiB',
                    'allocation.volumes': 'v1'}
    # Values are aligned in one column.
    lines = [line for line in out.splitlines() if line.startswith('| ')]
    assert len({line.index('|', 1) for line in lines}) == 1


# -- global options before and after the command --------------------------

@pytest.mark.parametrize('argv', [
    ['--socket', '{sock}', '--json', 'agent-status'],
    ['agent-status', '--socket', '{sock}', '--json'],
    ['--json', 'agent-status', '--socket', '{sock}'],
    ['--socket', '{sock}', 'agent-status', '--json'],
])
def test_global_options_anywhere(capsys, sock, argv):
    status, out, _ = run(capsys, *[a.format(sock=sock) for a in argv])
    assert status == 0
    assert json.loads(out)['engine'] == 'ucache'


def test_socket_after_command_overrides(capsys, sock, short_tmpdir):
    wrong = os.path.join(short_tmpdir, 'wrong.sock')
    status, _, _ = run(capsys, '--socket', wrong, 'agent-status',
                       '--socket', sock)
    assert status == 0


def test_socket_from_environment(capsys, sock, monkeypatch):
    monkeypatch.setenv('FCACHE_SOCKET', sock)
    status, out, _ = run(capsys, 'agent-status', '--json')
    assert status == 0
    assert json.loads(out)['version'] == '0.1.0'


def test_default_socket(monkeypatch):
    args = cli.build_parser(environ={}).parse_args(['agent-status'])
    assert args.socket == '/run/fcache/agent.sock'
    assert args.json is False


# -- volume commands --------------------------------------------------------

def test_volume_attach_json(capsys, sock, fake_agent):
    status, out, err = run(capsys, '--socket', sock, '--json',
                           'volume-attach', 'v1', '--origin', '/dev/sdb',
                           '--cache-size', '10M', '--write-policy',
                           'write_back', '--admission', 'rws')
    assert (status, err) == (0, '')
    assert json.loads(out) == {
        'volume_id': 'v1',
        'export_uri': 'nbd+unix:///?socket=/run/fcache/exports/v1.sock'}
    assert fake_agent.requests[-1] == {
        'op': 'volume-attach',
        'args': {'volume_id': 'v1', 'origin': '/dev/sdb',
                 'cache_size': 10 * units.Mi, 'write_policy': 'write_back',
                 'admission': 'rws'}}


def test_volume_attach_rws_n_and_staging(capsys, sock, fake_agent):
    status, out, err = run(capsys, '--socket', sock, 'volume-attach', 'v1',
                           '--origin', '/dev/sdb', '--admission', 'rws',
                           '--rws-n', '2', '--staging', 'address', '--json')
    assert (status, err) == (0, '')
    assert fake_agent.requests[-1]['args'] == {
        'volume_id': 'v1', 'origin': '/dev/sdb', 'admission': 'rws',
        'rws_n': 2, 'staging': 'address'}


@pytest.mark.parametrize('staging', ['address', 'data', 'hybrid'])
def test_volume_attach_staging_kinds(capsys, sock, fake_agent, staging):
    status, _, _ = run(capsys, '--socket', sock, 'volume-attach', 'v1',
                       '--origin', '/d', '--staging', staging,
                       '--rws-n', '7')
    assert status == 0
    args = fake_agent.requests[-1]['args']
    assert (args['staging'], args['rws_n']) == (staging, 7)


def test_volume_attach_human(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-attach', 'v1',
                           '--origin', 'nbd://storage/v1')
    assert (status, err) == (0, '')
    assert table(out) == {
        'volume_id': 'v1',
        'export_uri': 'nbd+unix:///?socket=/run/fcache/exports/v1.sock'}


def test_volume_show_json_and_human(capsys, sock):
    run(capsys, '--socket', sock, 'volume-attach', 'v1', '--origin', '/d')
    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'v1',
                           '--json')
    assert (status, err) == (0, '')
    shown = json.loads(out)
    assert shown['hit_ratio'] == 0.8
    assert shown['block_size'] == 4096

    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'v1')
    assert (status, err) == (0, '')
    rows = table(out)
    assert rows['reads'] == '100'
    assert rows['hit_ratio'] == '80.0%'
    assert rows['block_size'] == '4.0 KiB'
    assert rows['origin_read_bytes'] == '80.0 KiB'
    # The allocation object is flattened into dotted rows.
    flat = set(shown) - {'allocation'}
    flat |= {'allocation.' + k for k in shown['allocation']
             if k != 'staging'}
    flat |= {'allocation.staging.' + k
             for k in shown['allocation']['staging']}
    assert set(rows) == flat


def test_volume_show_allocation_rows(capsys, sock):
    run(capsys, '--socket', sock, 'volume-attach', 'v1', '--origin', '/d',
        '--cache-size', '1M', '--admission', 'rws', '--rws-n', '2',
        '--staging', 'data')
    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'v1')
    assert (status, err) == (0, '')
    rows = table(out)
    assert rows['allocation.share_bytes'] == '1.0 MiB'
    assert rows['allocation.limit_bytes'] == '1.0 MiB'
    assert rows['allocation.used_bytes'] == '0 B'
    # No window has closed yet: no RWSS, no prediction.
    assert rows['allocation.rwss_observed_bytes'] == '-'
    assert rows['allocation.rwss_predicted_bytes'] == '-'
    assert rows['allocation.prediction_error'] == '-'
    assert rows['allocation.rws_n'] == '2'
    assert rows['allocation.staging.kind'] == 'data'
    assert rows['allocation.staging.area_bytes'] == '1.0 MiB'
    assert rows['allocation.staging.data_hits'] == '0'


def test_volume_list_json_and_human(capsys, sock):
    # No rows, no table (the OpenStack client's way) unless asked.
    status, out, _ = run(capsys, '--socket', sock, 'volume-list')
    assert (status, out) == (0, '')
    status, out, _ = run(capsys, '--socket', sock, 'volume-list',
                         '--print-empty')
    assert (status, listing(out)) == (0, [])
    assert grid(out)[0] == list(volume.LIST_COLUMNS)
    status, out, _ = run(capsys, '--socket', sock, 'volume-list', '--json')
    assert (status, json.loads(out)) == (0, {'volumes': []})

    for vid in ('v1', 'volume-2'):
        run(capsys, '--socket', sock, 'volume-attach', vid, '--origin', '/d')
    status, out, _ = run(capsys, '--socket', sock, 'volume-list', '--json')
    assert status == 0
    assert [v['volume_id'] for v in json.loads(out)['volumes']] == [
        'v1', 'volume-2']

    status, out, _ = run(capsys, '--socket', sock, 'volume-list')
    assert status == 0
    rows = listing(out)
    assert [r['volume_id'] for r in rows] == ['v1', 'volume-2']
    assert rows[0]['cache_size'] == '64.0 MiB'
    # The fake agent reports no state: '-', never 'None'.
    assert rows[0]['state'] == '-'
    # Columns line up: every line has its bars at the same offsets.
    bars = {tuple(i for i, c in enumerate(line) if c in '|+')
            for line in out.splitlines()}
    assert len(bars) == 1


def test_volume_list_of_ids(capsys, sock, fake_agent):
    fake_agent.handlers['volume-list'] = lambda args: {'volumes': ['a', 'b']}
    status, out, _ = run(capsys, '--socket', sock, 'volume-list', '-c',
                         'volume_id', '-f', 'value')
    assert (status, out) == (0, 'a\nb\n')


def test_volume_detach(capsys, sock, fake_agent):
    run(capsys, '--socket', sock, 'volume-attach', 'v1', '--origin', '/d')
    status, out, err = run(capsys, '--socket', sock, 'volume-detach', 'v1')
    assert (status, out, err) == (0, 'volume v1 detached\n', '')
    assert fake_agent.volumes == {}

    run(capsys, '--socket', sock, 'volume-attach', 'v1', '--origin', '/d')
    status, out, _ = run(capsys, '--socket', sock, '--json',
                         'volume-detach', 'v1')
    assert (status, json.loads(out)) == (0, {'volume_id': 'v1'})
    assert 'discard_dirty' not in fake_agent.requests[-1]['args']


def test_volume_detach_discard_dirty(capsys, sock, fake_agent):
    run(capsys, '--socket', sock, 'volume-attach', 'v1', '--origin', '/d')
    status, out, err = run(capsys, '--socket', sock, 'volume-detach', 'v1',
                           '--discard-dirty')
    assert (status, err) == (0, '')
    assert out.startswith('volume v1 detached\n')
    assert 'dirty_blocks_dropped' in out and '3' in out
    assert fake_agent.requests[-1]['args'] == {'volume_id': 'v1',
                                               'discard_dirty': True}


def test_volume_claim(capsys, sock, fake_agent):
    fake_agent.handlers['volume-claim'] = lambda args: {
        'volume_id': args['volume_id'], 'writeback_was_held': False}
    status, out, _ = run(capsys, '--socket', sock, '--json',
                         'volume-claim', 'v1')
    assert (status, json.loads(out)) == (0, {'volume_id': 'v1',
                                             'writeback_was_held': False})
    assert fake_agent.requests[-1]['op'] == 'volume-claim'


# -- volume-set -------------------------------------------------------------

def _set_handler(fake_agent, seen):
    # The fake's own error class (conftest.py, as pytest imported it).
    fake_error = sys.modules[type(fake_agent).__module__].FakeAgentError

    def handler(args):
        seen.append(args)
        if args.get('write_policy') == 'write_through':
            raise fake_error(
                'cannot change volume v1 to write_through: writing its dirty '
                'blocks back to the origin failed: Input/output error; it '
                'stays write_back and loses nothing', 5)
        return {'volume_id': args['volume_id'],
                'write_policy': args.get('write_policy', 'write_back'),
                'previous_write_policy': 'write_back',
                'dirty_blocks_written': 0,
                'cache_size': args.get('cache_size', 1 << 20),
                'previous_cache_size': 1 << 20, 'blocks_evicted': 0}
    fake_agent.handlers['volume-set'] = handler


def test_volume_set(capsys, sock, fake_agent):
    seen = []
    _set_handler(fake_agent, seen)
    status, out, err = run(capsys, '--socket', sock, '--json', 'volume-set',
                           'v1', '--write-policy', 'read_only')
    assert (status, err) == (0, '')
    assert json.loads(out)['write_policy'] == 'read_only'
    status, out, err = run(capsys, '--socket', sock, 'volume-set', 'v1',
                           '--write-policy', 'write_back', '--cache-size',
                           '1M')
    assert (status, err) == (0, '')
    assert table(out)['previous_write_policy'] == 'write_back'
    assert seen == [{'volume_id': 'v1', 'write_policy': 'read_only'},
                    {'volume_id': 'v1', 'write_policy': 'write_back',
                     'cache_size': 1 << 20}]


def test_volume_set_failure_is_one_line(capsys, sock, fake_agent):
    _set_handler(fake_agent, [])
    status, out, err = run(capsys, '--socket', sock, 'volume-set', 'v1',
                           '--write-policy', 'write_through', '--timeout',
                           '10')
    assert (status, out) == (cli.EXIT_FAILED, '')
    assert_one_line_error(err, 'stays write_back and loses nothing')


def test_volume_set_waits_for_the_write_back(monkeypatch):
    made = []

    class Client(object):
        def __init__(self, socket_path, timeout):
            made.append((socket_path, timeout))

        def set_volume(self, volume_id, write_policy, cache_size):
            return {'volume_id': volume_id}

    # What the command line hands the command: the --socket client.
    given = agent.AgentClient('/s')
    monkeypatch.setattr(volume_set.agent, 'AgentClient', Client)
    args = cli.build_parser().parse_args(
        ['--socket', '/s', 'volume-set', 'v1', '--write-policy',
         'write_back'])
    assert args.run(given, args) == {'volume_id': 'v1'}
    assert made == [('/s', volume_set.DEFAULT_TIMEOUT_S)]
    args = cli.build_parser().parse_args(
        ['volume-set', 'v1', '--write-policy', 'write_back', '--timeout',
         '5'])
    args.run(given, args)
    assert made[-1] == ('/s', 5.0)


@pytest.mark.parametrize('argv, fragment', [
    (['volume-set', 'v1'], 'give a write policy or a cache size'),
    (['volume-set', 'v1', '--write-policy', 'write_around'],
     'invalid choice'),
    (['volume-set', 'v1', '--cache-size', 'big'], 'invalid size'),
    (['volume-set', 'v1', '--write-policy', 'read_only', '--timeout', '0'],
     'must be positive'),
    (['volume-set', '--write-policy', 'read_only'],
     'the following arguments are required'),
])
def test_volume_set_bad_arguments(capsys, sock, fake_agent, argv, fragment):
    status, out, err = run(capsys, '--socket', sock, *argv)
    assert (status, out) == (cli.EXIT_USAGE, '')
    assert_one_line_error(err, fragment)
    assert fake_agent.requests == []


# -- allocation -------------------------------------------------------------

# The agent's "allocation" result: one volume past its first window, one
# attached since (RWSS figures null), one without staging figures.
ALLOCATION = {
    'mode': 'rwss', 'spare': 'idle', 'window_s': 86400, 'headroom': 0.1,
    'capacity_bytes': 8 * units.Gi,
    'volumes': [
        {'id': 'vol-web', 'share_bytes': 2 * units.Gi,
         'used_bytes': 1536 * units.Mi, 'limit_bytes': 3 * units.Gi,
         'rwss_observed_bytes': 1800 * units.Mi,
         'rwss_predicted_bytes': 1900 * units.Mi,
         'prediction_error': 0.0556, 'window_s': 65536, 'rws_n': 1,
         'window_auto': True, 'window_at_knee': True,
         'tracker': {'memory_bytes': 1048574, 'sample_rate': 0.25,
                     'knee_memory_bytes': 49448},
         'staging': {'kind': 'hybrid', 'area_bytes': 64 * units.Mi,
                     'used_bytes': 40 * units.Mi, 'addresses': 81920,
                     'data_blocks': 8960, 'admitted': 12000,
                     'data_hits': 4321, 'evicted': 700, 'recalled': 650,
                     'history_blocks': 52000,
                     'history_bytes': 1024 * units.Ki}},
        {'id': 'vol-new', 'share_bytes': 512 * units.Mi, 'used_bytes': 0,
         'limit_bytes': 512 * units.Mi, 'rwss_observed_bytes': None,
         'rwss_predicted_bytes': None, 'prediction_error': None,
         'window_s': 86400, 'rws_n': 2,
         'staging': {'kind': 'address', 'area_bytes': 16 * units.Mi,
                     'used_bytes': 0, 'addresses': 0, 'data_blocks': 0,
                     'admitted': 0, 'data_hits': 0, 'evicted': 0}},
        {'id': 'vol-all', 'share_bytes': 4 * units.Gi,
         'used_bytes': 4 * units.Gi, 'limit_bytes': 4 * units.Gi,
         'rwss_observed_bytes': 0, 'rwss_predicted_bytes': 0,
         'prediction_error': 0.0, 'window_s': 86400, 'rws_n': 1,
         'staging': {}},
    ]}


def test_allocation_table(capsys, sock, fake_agent):
    fake_agent.handlers['allocation'] = lambda args: ALLOCATION
    status, out, err = run(capsys, '--socket', sock, 'allocation')
    assert (status, err) == (0, '')
    settings, volumes = tables(out)
    assert table(settings) == {'mode': 'rwss', 'spare': 'idle',
                               'window_s': '86400', 'headroom': '0.1',
                               'capacity_bytes': '8.0 GiB'}
    assert listing(volumes) == [
        {'id': 'vol-web', 'share_bytes': '2.0 GiB', 'used_bytes': '1.5 GiB',
         'limit_bytes': '3.0 GiB', 'rwss_predicted_bytes': '1.9 GiB'},
        {'id': 'vol-new', 'share_bytes': '512.0 MiB', 'used_bytes': '0 B',
         'limit_bytes': '512.0 MiB', 'rwss_predicted_bytes': '-'},
        {'id': 'vol-all', 'share_bytes': '4.0 GiB', 'used_bytes': '4.0 GiB',
         'limit_bytes': '4.0 GiB', 'rwss_predicted_bytes': '0 B'}]


def test_allocation_long(capsys, sock, fake_agent):
    fake_agent.handlers['allocation'] = lambda args: ALLOCATION
    status, out, err = run(capsys, '--socket', sock, 'allocation', '--long')
    assert (status, err) == (0, '')
    rows = listing(tables(out)[1])
    web, new, every = rows
    assert web['prediction_error'] == '5.6%'
    assert web['staging.used_bytes'] == '40.0 MiB'
    assert web['staging.area_bytes'] == '64.0 MiB'
    assert web['staging.data_hits'] == '4321'
    assert web['staging.recalled'] == '650'
    assert web['staging.history_bytes'] == '1.0 MiB'
    # Its window chosen at the knee; an older agent's volume: '-'.
    assert (web['window_s'], web['window_auto'], web['window_at_knee']) == (
        '65536', 'true', 'true')
    assert web['tracker.knee_memory_bytes'] == '48.3 KiB'
    assert (new['window_auto'], new['tracker.knee_memory_bytes']) == ('-', '-')
    # An agent without the reuse history: '-'.
    assert new['staging.history_bytes'] == '-'
    assert (new['rwss_observed_bytes'], new['prediction_error']) == ('-', '-')
    # A volume without staging figures: '-' in every staging column.
    assert every['staging.kind'] == '-'


def test_allocation_json_and_human(capsys, sock, fake_agent):
    fake_agent.handlers['allocation'] = lambda args: ALLOCATION
    status, out, err = run(capsys, '--socket', sock, 'allocation', '--json')
    assert (status, err) == (0, '')
    assert json.loads(out) == ALLOCATION
    assert fake_agent.requests[-1] == {'op': 'allocation', 'args': {}}

    # -f json: the rows, raw numbers, null for unknown.
    status, out, err = run(capsys, '--socket', sock, 'allocation', '-f',
                           'json')
    assert (status, err) == (0, '')
    assert json.loads(out) == [
        {'id': v['id'], 'share_bytes': v['share_bytes'],
         'used_bytes': v['used_bytes'], 'limit_bytes': v['limit_bytes'],
         'rwss_predicted_bytes': v['rwss_predicted_bytes']}
        for v in ALLOCATION['volumes']]


def test_allocation_of_the_fake_agent(capsys, sock):
    status, out, _ = run(capsys, '--socket', sock, 'allocation')
    assert status == 0
    assert out.endswith('no volumes\n')
    assert table(out.replace('no volumes\n', ''))['mode'] == 'rwss'

    run(capsys, '--socket', sock, 'volume-attach', 'v1', '--origin', '/d',
        '--cache-size', '64M')
    status, out, _ = run(capsys, '--socket', sock, 'allocation', '--long')
    assert status == 0
    row, = listing(tables(out)[1])
    assert [row[k] for k in ('id', 'share_bytes', 'used_bytes',
                             'limit_bytes', 'rwss_observed_bytes',
                             'rwss_predicted_bytes', 'prediction_error',
                             'staging.used_bytes', 'staging.area_bytes',
                             'staging.data_hits')] == [
        'v1', '64.0 MiB', '0 B', '64.0 MiB', '-', '-', '-', '0 B', '1.0 MiB',
        '0']


def test_allocation_unknown_to_an_older_agent(capsys, sock, fake_agent):
    del fake_agent.handlers['allocation']
    status, out, err = run(capsys, '--socket', sock, 'allocation')
    assert (status, out) == (cli.EXIT_FAILED, '')
    assert_one_line_error(err, "unknown operation 'allocation'")


# -- failures ---------------------------------------------------------------

def test_agent_error_is_one_line(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'nope')
    assert status == cli.EXIT_FAILED == 1
    assert out == ''
    assert_one_line_error(err, 'volume nope is not attached',
                          'errno 2 ENOENT')


def test_agent_error_json_mode_too(capsys, sock):
    run(capsys, '--socket', sock, 'volume-attach', 'v1', '--origin', '/d')
    status, out, err = run(capsys, '--socket', sock, '--json',
                           'volume-attach', 'v1', '--origin', '/d')
    assert (status, out) == (1, '')
    assert_one_line_error(err, 'already attached', 'EEXIST')


def test_agent_multiline_error_stays_one_line(capsys, sock, fake_agent):
    fake_agent.raw_reply = (b'{"ok": false, "error": "first\\nsecond", '
                            b'"errno": 5}\n')
    status, _, err = run(capsys, '--socket', sock, 'agent-status')
    assert status == 1
    assert_one_line_error(err, 'first second', 'EIO')


def test_unreachable(capsys, short_tmpdir):
    path = os.path.join(short_tmpdir, 'missing.sock')
    status, out, err = run(capsys, '--socket', path, 'agent-status')
    assert status == cli.EXIT_UNREACHABLE
    assert out == ''
    assert_one_line_error(err, path, 'no such socket', 'fcache-agent')


def test_protocol_error(capsys, sock, fake_agent):
    fake_agent.raw_reply = b'garbage\n'
    status, out, err = run(capsys, '--socket', sock, 'agent-status')
    assert (status, out) == (cli.EXIT_PROTOCOL, '')
    assert_one_line_error(err, 'not valid JSON')


@pytest.mark.parametrize('argv, fragment', [
    ([], 'required: COMMAND'),
    (['no-such-command'], 'invalid choice'),
    (['volume-attach', 'v1'], 'volume-attach: the following arguments are '
                              'required: --origin'),
    (['volume-attach', '--origin', '/d'], 'required: ID'),
    (['volume-attach', 'v1', '--origin', '/d', '--cache-size', '10X'],
     "invalid size '10X'"),
    (['volume-attach', 'v1', '--origin', '/d', '--cache-size', '0'],
     'greater than zero'),
    (['volume-attach', 'v1', '--origin', '/d', '--write-policy', 'bogus'],
     'invalid choice'),
    (['volume-attach', 'v1', '--origin', '/d', '--admission', 'bogus'],
     'invalid choice'),
    (['volume-attach', 'v1', '--origin', '/d', '--rws-n', '0'],
     "invalid RWS_N '0': must be an integer from 1 to 7"),
    (['volume-attach', 'v1', '--origin', '/d', '--rws-n', '8'],
     "invalid RWS_N '8'"),
    (['volume-attach', 'v1', '--origin', '/d', '--rws-n', 'two'],
     "invalid RWS_N 'two'"),
    (['volume-attach', 'v1', '--origin', '/d', '--rws-n', '1.5'],
     "invalid RWS_N '1.5'"),
    (['volume-attach', 'v1', '--origin', '/d', '--staging', 'lru'],
     'invalid choice'),
    (['allocation', 'v1'], 'unrecognized arguments: v1'),
    (['volume-show'], 'volume-show: the following arguments are required'),
    (['volume-list', 'extra'], 'unrecognized arguments: extra'),
    (['--bogus', 'agent-status'], 'unrecognized arguments: --bogus'),
])
def test_bad_arguments(capsys, sock, fake_agent, argv, fragment):
    status, out, err = run(capsys, '--socket', sock, *argv)
    assert (status, out) == (cli.EXIT_USAGE, '')
    assert_one_line_error(err, fragment)
    assert fake_agent.requests == []


def test_empty_volume_id_is_refused_before_sending(capsys, sock, fake_agent):
    status, _, err = run(capsys, '--socket', sock, 'volume-show', '')
    assert status == cli.EXIT_USAGE
    assert_one_line_error(err, "volume-show: invalid ID '': must be a "
                               "non-empty string")
    assert fake_agent.requests == []


def test_help_exits_zero(capsys):
    status, out, err = run(capsys, '--help')
    assert (status, err) == (0, '')
    for command in ('agent-status', 'allocation', 'volume-attach',
                    'volume-show', 'volume-detach', 'volume-list'):
        assert command in out
    status, out, _ = run(capsys, 'volume-attach', '--help')
    assert status == 0
    for option in ('--cache-size', '--admission', '--rws-n', '--staging'):
        assert option in out


def test_console_script_process(sock, fake_agent, short_tmpdir):
    """The real process: exit status and stderr as a shell sees them."""
    env = dict(os.environ, FCACHE_SOCKET=sock)
    done = subprocess.run(
        [sys.executable, '-m', 'nova_ext.cli', 'agent-status', '--json'],
        env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, '')
    assert json.loads(done.stdout)['engine'] == 'ucache'

    env['FCACHE_SOCKET'] = os.path.join(short_tmpdir, 'missing.sock')
    done = subprocess.run(
        [sys.executable, '-m', 'nova_ext.cli', 'volume-list'],
        env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == cli.EXIT_UNREACHABLE
    assert done.stdout == ''
    assert_one_line_error(done.stderr, 'missing.sock')


# -- size units -------------------------------------------------------------

@pytest.mark.parametrize('text, size', [
    ('4096', 4096),
    ('4K', 4 * units.Ki),
    ('4k', 4 * units.Ki),
    ('64KiB', 64 * units.Ki),
    ('10M', 10 * units.Mi),
    ('10MB', 10 * units.Mi),
    ('2G', 2 * units.Gi),
    ('2 G', 2 * units.Gi),
    ('1T', units.Ti),
    ('1P', units.Pi),
    ('512B', 512),
])
def test_size_units(text, size):
    assert units.parse_size(text) == size
    assert volume.size_arg(text) == size


@pytest.mark.parametrize('text', [
    '', 'K', '1.5G', '-1', '0', '0K', '10X', '10iB', 'G10', '1 0M',
    '16777216P',
])
def test_bad_sizes(text):
    with pytest.raises(ValueError):
        units.parse_size(text)


def test_format_size():
    assert units.format_size(512) == '512 B'
    assert units.format_size(1536) == '1.5 KiB'
    assert units.format_size(3 * units.Gi) == '3.0 GiB'


def test_version_is_pbrs(capsys):
    # The one version string every fcache program prints (pbr's); the
    # packaging test checks the four programs agree once installed.
    from nova_ext import version
    status, out, err = run(capsys, '--version')
    assert status == 0
    assert out == version.version_string() + '\n'
    assert version.version_string()[0].isdigit()


def test_balancer_version_is_pbrs(capsys):
    from nova_ext.balancer import service
    from nova_ext import version
    with pytest.raises(SystemExit) as exc:
        service.main(['--version'])
    assert exc.value.code == 0
    out, err = capsys.readouterr()
    assert (out + err).strip() == version.version_string()
