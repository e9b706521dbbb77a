"""Human output of the ``fcache`` command line: aligned tables."""

import json

from nova_ext import units


def format_value(key, value):
    """Return one result value as a short string for a table cell."""
    if value is None:
        return '-'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, int):
        if key.endswith(('_bytes', '_size')) and value >= units.Ki:
            return '%d (%s)' % (value, units.format_size(value))
        return str(value)
    if isinstance(value, float):
        return '%.6g' % value
    if isinstance(value, str):
        return ' '.join(value.splitlines()) if value else '-'
    if isinstance(value, list):
        if not value:
            return '-'
        return ', '.join(_list_item(item) for item in value)
    return json.dumps(value, sort_keys=True)


def _list_item(item):
    if isinstance(item, dict):
        for key in ('volume_id', 'id', 'name'):
            if key in item:
                return format_value(key, item[key])
        return json.dumps(item, sort_keys=True)
    return format_value('', item)


def _flatten(obj, prefix=''):
    for key, value in obj.items():
        name = prefix + str(key)
        if isinstance(value, dict) and value:
            for item in _flatten(value, name + '.'):
                yield item
        else:
            yield name, value


def format_table(result):
    """Return ``result`` as ``key  value`` lines with aligned values.

    Nested objects are flattened with dotted keys (``stats.reads``).
    """
    rows = [(key, format_value(key, value))
            for key, value in _flatten(result)]
    if not rows:
        return ''
    width = max(len(key) for key, _ in rows)
    return ''.join('%-*s  %s\n' % (width, key, text)
                   for key, text in rows)


def format_columns(rows, first=()):
    """Return a list of objects as a table with one column per key.

    Columns named in ``first`` come first when present; other keys follow
    in the order they are first seen.
    """
    columns = [key for key in first if any(key in row for row in rows)]
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    cells = [[format_value(key, row.get(key)) for key in columns]
             for row in rows]
    return format_grid(columns, cells)


def format_grid(header, cells):
    """Return a header and rows of strings as left-aligned columns."""
    lines = [list(header)] + [list(line) for line in cells]
    widths = [max(len(line[i]) for line in lines)
              for i in range(len(header))]
    return ''.join('  '.join('%-*s' % (w, text)
                             for w, text in zip(widths, line)).rstrip() + '\n'
                   for line in lines)


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
