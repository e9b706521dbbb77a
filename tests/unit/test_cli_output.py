# SPDX-License-Identifier: Apache-2.0
"""The ``fcache`` command line's output conventions (issue 33, item 4).

Every listing and show takes the OpenStack client's -f, -c (and --long);
each machine format must parse back to the agent's raw numbers, and a
default table must fit 120 characters for a realistic volume: the fixture
fixtures/volume_show.json has every field the real agent's volume-show
and volume-list report (fcache_agent/src/ucache/ucache_engine_ops.c,
uc_volume_json, and control_ops.c's volume_json), with a Cinder volume id,
a long origin URI and a migration under way.
"""

import csv
import io
import json
import os

import pytest
import yaml

from nova_ext import cli
from nova_ext.commands import output
from nova_ext.commands import volume
from tests.unit import test_cli

FIXTURE = os.path.join(os.path.dirname(__file__), 'fixtures',
                       'volume_show.json')


def load_volume():
    with open(FIXTURE) as f:
        return json.load(f)


def unavailable_volume():
    """A second volume, in the widest state the agent reports."""
    vol = load_volume()
    for key in ('writeback', 'writeback_held', 'migration', 'connections',
                'strategy_hint'):
        del vol[key]
    vol.update(volume_id='0a3e5c1d-77b2-4d0f-8c61-9e2f4b7a5d10',
               state='unavailable', export_uri='',
               error='cannot open origin: Connection refused',
               cache_size=1023 * 1024 * 1024 + 900 * 1024 * 1024 // 1000)
    return vol


run = test_cli.run


@pytest.fixture
def sock(fake_agent):
    volumes = [load_volume(), unavailable_volume()]
    fake_agent.handlers['volume-list'] = lambda args: {'volumes': volumes}
    fake_agent.handlers['volume-show'] = lambda args: volumes[0]
    return fake_agent.socket_path


def flat_fixture():
    return dict(output.flatten(load_volume()))


# -- volume-list --------------------------------------------------------------

def test_list_default_table_fits_120_columns(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-list')
    assert (status, err) == (0, '')
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 120, out
    rows = test_cli.listing(out)
    assert [r['volume_id'] for r in rows] == [
        load_volume()['volume_id'], unavailable_volume()['volume_id']]
    first = rows[0]
    # Sizes humanised alike, the ratio as a percentage.
    assert first == {'volume_id': load_volume()['volume_id'],
                     'state': 'attached', 'cache_size': '10.0 GiB',
                     'cached_bytes': '9.2 GiB', 'dirty_bytes': '63.8 MiB',
                     'hit_ratio': '91.4%'}


def test_list_long_has_every_field_and_no_json_in_a_cell(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-list', '--long')
    assert (status, err) == (0, '')
    rows = test_cli.listing(out)
    assert set(flat_fixture()) <= set(rows[0])
    for row in rows:
        for name, cell in row.items():
            assert not cell.startswith(('{', '[')), (name, cell)
            assert cell != 'None', name
    # A nested object is flattened, a list shown item by item.
    assert rows[0]['allocation.staging.kind'] == 'hybrid'
    assert rows[0]['migration.rate_bytes_per_s'] == '100.0 MiB/s'
    assert rows[0]['allocation.rwss_by_n_bytes'].startswith(
        '20.0 GiB, 12.0 GiB, 8.5 GiB')
    # What the second volume lacks is '-'.
    assert rows[1]['migration.state'] == '-'


def test_list_json_has_the_raw_numbers(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-list', '-f',
                           'json')
    assert (status, err) == (0, '')
    rows = json.loads(out)
    vol = load_volume()
    assert rows[0] == {'volume_id': vol['volume_id'], 'state': 'attached',
                       'cache_size': vol['cache_size'],
                       'cached_bytes': vol['cached_blocks'] * 65536,
                       'dirty_bytes': vol['dirty_blocks'] * 65536,
                       'hit_ratio': vol['hit_ratio']}


def test_list_csv_reads_back(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-list', '--long',
                           '-f', 'csv')
    assert (status, err) == (0, '')
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2
    flat = flat_fixture()
    for name in ('volume_id', 'origin', 'export_uri', 'state'):
        assert rows[0][name] == flat[name]
    for name in ('cache_size', 'reads', 'allocation.share_bytes',
                 'migration.bytes_done'):
        assert int(rows[0][name]) == flat[name], name
    assert float(rows[0]['hit_ratio']) == flat['hit_ratio']
    # A list is one cell of comma-separated numbers; unknown is empty.
    assert [int(x) for x in rows[0]['allocation.rwss_by_n_bytes'].split(
        ',')] == flat['allocation.rwss_by_n_bytes']
    assert rows[1]['migration.state'] == ''


def test_list_value_columns(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-list', '-f',
                           'value', '-c', 'volume_id', '-c', 'cache_size')
    assert (status, err) == (0, '')
    assert out.splitlines() == [
        '%s %d' % (load_volume()['volume_id'], 10 * 1024 ** 3),
        '%s %d' % (unavailable_volume()['volume_id'],
                   unavailable_volume()['cache_size'])]


def test_list_yaml(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-list', '-f',
                           'yaml', '-c', 'volume_id', '-c', 'hit_ratio')
    assert (status, err) == (0, '')
    assert yaml.safe_load(out) == [
        {'volume_id': load_volume()['volume_id'], 'hit_ratio': 0.9137},
        {'volume_id': unavailable_volume()['volume_id'],
         'hit_ratio': 0.9137}]


def test_list_columns_in_the_order_asked(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-list', '-c',
                           'write_policy', '-c', 'volume_id')
    assert (status, err) == (0, '')
    header, rows = test_cli.grid(out)
    assert header == ['write_policy', 'volume_id']
    assert rows[0] == ['write_through', load_volume()['volume_id']]


def test_unknown_column(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-list', '-c',
                           'colour')
    assert (status, out) == (cli.EXIT_USAGE, '')
    test_cli.assert_one_line_error(err, "invalid -c 'colour'",
                                   'no such column', 'volume_id',
                                   'hit_ratio')


def test_bad_format(capsys, sock, fake_agent):
    status, out, err = run(capsys, '--socket', sock, 'volume-list', '-f',
                           'xml')
    assert (status, out) == (cli.EXIT_USAGE, '')
    test_cli.assert_one_line_error(err, 'volume-list', '-f/--format',
                                   "invalid choice: 'xml'", 'table', 'csv')
    assert fake_agent.requests == []


# -- volume-show --------------------------------------------------------------

def test_show_table_humanised_and_flat(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'v')
    assert (status, err) == (0, '')
    rows = test_cli.table(out)
    assert set(rows) == set(flat_fixture())
    assert rows['cache_size'] == '10.0 GiB'
    assert rows['size'] == '100.0 GiB'
    assert rows['read_bytes'] == '2.9 TiB'
    assert rows['allocation.prediction_error'] == '4.2%'
    assert rows['allocation.tracker.sample_rate'] == '0.25'
    assert rows['strategy_hint.strategy'] == 'hybrid'
    assert not any(v.startswith(('{', '[')) for v in rows.values())
    # The identity and state come first.
    assert list(rows)[:3] == ['volume_id', 'state', 'origin']


@pytest.mark.parametrize('fmt', ['json', 'yaml'])
def test_show_structured_formats(capsys, sock, fmt):
    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'v',
                           '-f', fmt)
    assert (status, err) == (0, '')
    shown = json.loads(out) if fmt == 'json' else yaml.safe_load(out)
    assert shown == flat_fixture()


def test_show_csv_and_value(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'v',
                           '-f', 'csv', '-c', 'volume_id', '-c',
                           'allocation.used_bytes', '-c', 'writeback')
    assert (status, err) == (0, '')
    row, = list(csv.DictReader(io.StringIO(out)))
    assert row == {'volume_id': load_volume()['volume_id'],
                   'allocation.used_bytes': '9911336960',
                   'writeback': 'held'}
    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'v',
                           '-f', 'value', '-c', 'dirty_blocks', '-c',
                           'hit_ratio')
    assert (status, out, err) == (0, '1021\n0.9137\n', '')


def test_show_json_option_is_the_agent_answer(capsys, sock):
    status, out, err = run(capsys, '--socket', sock, 'volume-show', 'v',
                           '--json')
    assert (status, err) == (0, '')
    assert json.loads(out) == load_volume()


# -- values -------------------------------------------------------------------

@pytest.mark.parametrize('key, value, text', [
    ('cache_size', 0, '0 B'),
    ('cache_size', 512, '512 B'),
    ('used_bytes', 1536, '1.5 KiB'),
    ('allocation.limit_bytes', 3 << 30, '3.0 GiB'),
    ('rate_bytes_per_s', 1048576.0, '1.0 MiB/s'),
    ('hit_ratio', 0.5, '50.0%'),
    ('prediction_error', None, '-'),
    ('origin', '', '-'),
    ('origin', 'a\nb', 'a b'),
    ('reads', 123456789, '123456789'),
    ('duration_s', 1.25, '1.25'),
    ('discard', True, 'true'),
    ('volumes', [], '-'),
    ('volumes', ['a', 'b'], 'a, b'),
])
def test_human(key, value, text):
    assert output.human(key, value) == text


def test_list_of_objects_shown_by_id():
    flat = dict(output.flatten({'volumes': [{'volume_id': 'a', 'x': 1},
                                            {'id': 'b'}], 'empty': {}}))
    assert flat == {'volumes': ['a', 'b'], 'empty': None}


def test_default_columns_are_known_fields():
    flat = dict(output.flatten(volume.list_row(load_volume())))
    assert set(volume.LIST_COLUMNS) <= set(flat)
    assert set(volume.LONG_COLUMNS) <= set(flat)


def test_earlier_helpers_keep_working():
    # Commands written alongside this change call these.
    assert test_cli.table(output.format_table(
        {'volume_id': 'v', 'cache_size': 1 << 20})) == {
            'volume_id': 'v', 'cache_size': '1.0 MiB'}
    assert test_cli.listing(output.format_columns(
        [{'b': 1, 'volume_id': 'v'}], first=('volume_id',))) == [
            {'volume_id': 'v', 'b': '1'}]
    assert test_cli.grid(output.format_grid(['a', 'b'], [['1', '2']])) == (
        ['a', 'b'], [['1', '2']])
    assert output.format_value('used_bytes', 0) == '0 B'
