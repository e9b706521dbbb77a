# SPDX-License-Identifier: Apache-2.0
"""Output of the ``fcache`` command line, the OpenStack client's way.

Every command that shows something takes the options of
python-openstackclient (they come from cliff, whose formatters print the
result):

``-f table|json|yaml|value|csv``
    ``table`` (the default) is for people: sizes humanised (``1.5 GiB``),
    ratios as percentages, ``-`` for a value the agent does not know yet.
    The other formats are for programs: the agent's numbers as they are
    (bytes, fractions), ``null``/empty for an unknown value.
``-c COLUMN`` (repeatable)
    Only these columns (fields of a show), in this order.
``--long`` (listings)
    Every column instead of the default set, which fits 120 characters.

A nested object is flattened into dotted names (``allocation.share_bytes``)
and a list of objects is shown by their ids, so no cell ever holds JSON.
``--json`` (the older option, kept for scripts) prints the agent's whole
result object unchanged, nested objects and all.
"""

import io
import math

from cliff.formatters import commaseparated
from cliff.formatters import json_format
from cliff.formatters import table
from cliff.formatters import value as value_format
from cliff.formatters import yaml_format

from nova_ext import exception
from nova_ext import units

FORMATS = ('table', 'json', 'yaml', 'value', 'csv')
MACHINE_FORMATS = FORMATS[1:]

# A result's keys whose values are fractions of one, shown as percentages.
RATIO_KEYS = frozenset(('hit_ratio', 'prediction_error'))

_FORMATTERS = {
    'table': table.TableFormatter(),
    'json': json_format.JSONFormatter(),
    'yaml': yaml_format.YAMLFormatter(),
    'value': value_format.ValueFormatter(),
    'csv': commaseparated.CSVLister(),
}


def add_format_options(parser, listing=False):
    """Add ``-f``, ``-c`` (and ``--long`` to a listing) to ``parser``.

    The formatters' own options follow (``--noindent``, ``--max-width``,
    ``--fit-width``, ``--print-empty``, ``--quote``), as in the OpenStack
    client.
    """
    group = parser.add_argument_group('output formatters')
    group.add_argument(
        '-f', '--format', dest='format', choices=FORMATS, default='table',
        help='output format (default table); table humanises sizes, the '
             'others print the raw numbers')
    group.add_argument(
        '-c', '--column', dest='columns', action='append', default=[],
        metavar='COLUMN',
        help='show only this column (a field, for a show); repeat for more')
    if listing:
        group.add_argument(
            '--long', action='store_true',
            help='show every column, not only the default set')
    for name in FORMATS:
        _FORMATTERS[name].add_argument_group(parser)


# -- values -----------------------------------------------------------------

def _leaf(key):
    return key.rsplit('.', 1)[-1]


def is_size(key):
    """A key whose integer value is a number of bytes."""
    leaf = _leaf(key)
    return (leaf.endswith(('_bytes', '_size')) or leaf == 'size' or
            (leaf.startswith('bytes_') and not is_rate(key)))


def is_rate(key):
    return _leaf(key).endswith('_bytes_per_s')


def is_ratio(key):
    leaf = _leaf(key)
    return leaf in RATIO_KEYS or leaf.endswith('_ratio')


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def human(key, value):
    """One value as a short, one-line string for a table cell."""
    if value is None:
        return '-'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if _number(value) and math.isfinite(value):
        if is_rate(key) and value >= 0:
            return units.format_size(int(value)) + '/s'
        if is_size(key) and value >= 0 and float(value).is_integer():
            return units.format_size(int(value))
        if is_ratio(key):
            return '%.1f%%' % (value * 100.0)
    if isinstance(value, float):
        return '%.6g' % value
    if isinstance(value, str):
        return ' '.join(value.split()) if value.strip() else '-'
    if isinstance(value, (list, tuple)):
        if not value:
            return '-'
        return ', '.join(human(key, item) for item in value)
    if isinstance(value, dict):
        return human(key, _ident(value)) if value else '-'
    return str(value)


def machine(value, fmt):
    """One value as ``fmt`` prints it: raw; flat text for value and csv."""
    if fmt in ('json', 'yaml'):
        return value
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (list, tuple)):
        return ','.join(str(machine(item, fmt)) for item in value)
    return value


def _ident(obj):
    """What names an object in a list: its id, else its flattened fields."""
    for key in ('volume_id', 'id', 'name', 'vm', 'scheme'):
        if obj.get(key) is not None:
            return obj[key]
    return ' '.join('%s=%s' % (k, v) for k, v in flatten(obj))


def flatten(obj, prefix=''):
    """``(dotted key, value)`` pairs of a result; lists of objects by id."""
    for key, value in obj.items():
        name = prefix + str(key)
        if isinstance(value, dict) and value:
            for item in flatten(value, name + '.'):
                yield item
        elif isinstance(value, dict):
            yield name, None
        elif isinstance(value, list):
            yield name, [_ident(v) if isinstance(v, dict) else v
                         for v in value]
        else:
            yield name, value


# -- emitting -----------------------------------------------------------------

def _select(args, available, default):
    wanted = list(getattr(args, 'columns', None) or [])
    if not wanted:
        return list(default)
    unknown = [c for c in wanted if c not in available]
    if unknown:
        raise exception.InvalidArgument(
            name='-c', value=unknown[0],
            reason='no such column; the columns are: %s'
            % ', '.join(available))
    return wanted


def _emit(fmt, method, columns, data, args):
    stream = io.StringIO()
    getattr(_FORMATTERS[fmt], method)(columns, data, stream, args)
    return stream.getvalue()


def format_one(args, result, order=()):
    """``result`` (a dict) as one record in ``args.format``.

    Nested objects are flattened; fields named in ``order`` come first.
    """
    fields = dict(flatten(result))
    names = [k for k in order if k in fields]
    names += [k for k in fields if k not in names]
    names = _select(args, names, names)
    fmt = getattr(args, 'format', 'table')
    if fmt == 'table':
        return _emit(fmt, 'emit_one', names,
                     [human(k, fields[k]) for k in names], args)
    data = [machine(fields[k], fmt) for k in names]
    if fmt == 'csv':
        # One record: a header line and one row, as csv.DictReader reads.
        return _emit(fmt, 'emit_list', names, [data], args)
    return _emit(fmt, 'emit_one', names, data, args)


def format_list(args, rows, default, long=None):
    """``rows`` (dicts, flattened here) as a listing in ``args.format``.

    ``default`` names the columns shown without ``--long`` (and is what
    keeps the table within 120 characters); ``--long`` shows every key of
    every row, ``default`` first, then those of ``long``, then the others.
    """
    flat = [dict(flatten(row)) for row in rows]
    available = list(default) + list(long or ())
    for row in flat:
        available += [k for k in row if k not in available]
    available = list(dict.fromkeys(available))
    shown = available if getattr(args, 'long', False) else default
    names = _select(args, available, shown)
    fmt = getattr(args, 'format', 'table')
    if fmt == 'table':
        data = [[human(k, row.get(k)) for k in names] for row in flat]
    else:
        data = [[machine(row.get(k), fmt) for k in names] for row in flat]
    if fmt == 'table' and not data and not getattr(args, 'print_empty',
                                                   False):
        return ''
    return _emit(fmt, 'emit_list', names, data, args)


def table_text(result, order=()):
    """``result`` as a Field/Value table, whatever the options."""
    return format_one(_TableArgs(), result, order)


def table_list(rows, columns):
    """``rows`` as a table of ``columns``, whatever the options."""
    return format_list(_TableArgs(), rows, columns)


class _TableArgs(object):
    """The options a table needs, for text outside the chosen format."""
    format = 'table'
    columns = ()
    max_width = 0
    fit_width = False
    print_empty = False


# The helpers of the earlier output module, for a command that has not
# taken -f/-c yet (commands written alongside this one call them): the
# same humanised values, in the same bordered tables.

def format_value(key, value):
    """One value as a table cell (:func:`human`)."""
    return human(key, value)


def format_table(result):
    """``result`` as a Field/Value table (:func:`table_text`)."""
    return table_text(result)


def format_columns(rows, first=()):
    """Rows of dicts as a table: every key, those of ``first`` first."""
    args = _TableArgs()
    args.long = True
    return format_list(args, rows, [k for k in first
                                    if any(k in row for row in rows)])


def format_grid(header, cells):
    """A header and rows of strings as a table."""
    return _emit('table', 'emit_list', list(header),
                 [list(line) for line in cells], _TableArgs())


def format_bytes(value):
    """A byte count as a short size (``1.5 GiB``); None as ``-``."""
    if value is None or isinstance(value, bool):
        return '-'
    return units.format_size(value)


def format_ratio(value):
    """A fraction as a percentage (``12.5%``); None as ``-``."""
    if value is None or isinstance(value, bool):
        return '-'
    return '%.1f%%' % (value * 100.0)
