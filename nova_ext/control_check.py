# SPDX-License-Identifier: Apache-2.0
"""Requests checked against the agent's table of control operations.

nova_ext.control_schema is the agent's own description of each operation's
arguments (made from ``fcache-agent --control-schema``), so a request
this module passes is one the agent's table passes too, and the bounds
the client states (a move's tuning, RWS_N, a settle page) are read from
it rather than written out again.
"""

from nova_ext import control_schema
from nova_ext import exception

OPERATIONS = control_schema.OPERATIONS


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def argument(op, name):
    """The table's entry for argument ``name`` of ``op``."""
    return OPERATIONS[op]['arguments'][name]


def bounds(op, name):
    """(min, max) of integer argument ``name`` of ``op``."""
    arg = argument(op, name)
    return arg['min'], arg['max']


def _value_ok(arg, value):
    kind = arg['type']
    if kind == 'string':
        return isinstance(value, str)
    if kind == 'boolean':
        return isinstance(value, bool)
    if kind == 'size':
        return (_is_int(value) and value > 0) or isinstance(value, str)
    if kind == 'integer':
        return _is_int(value) and arg['min'] <= value <= arg['max']
    if kind == 'integer list':
        return (isinstance(value, (list, tuple)) and
                all(_is_int(v) and arg['min'] <= v <= arg['max']
                    for v in value))
    return False


def _expected(arg):
    kind = arg['type']
    if kind in ('integer', 'integer list'):
        return 'must be %s from %d to %d' % (
            'an integer' if kind == 'integer' else 'a list of integers',
            arg['min'], arg['max'])
    return {'string': 'must be a string',
            'boolean': 'must be true or false',
            'size': 'must be a positive number of bytes'}[kind]


def check_request(op, args):
    """Raise InvalidArgument unless the agent's table takes ``args``.

    None stands for an absent argument, as JSON null does for the agent.
    """
    if op not in OPERATIONS:
        raise exception.InvalidArgument(
            name='operation', value=op,
            reason='the agent has no such operation; it has: %s'
            % ', '.join(sorted(OPERATIONS)))
    table = OPERATIONS[op]['arguments']
    for name, value in sorted(args.items()):
        if name not in table:
            raise exception.InvalidArgument(
                name='argument of %s' % op, value=name,
                reason='the agent takes only %s'
                % (', '.join(sorted(table)) or 'no arguments'))
        if value is not None and not _value_ok(table[name], value):
            raise exception.InvalidArgument(
                name='%s of %s' % (name, op), value=value,
                reason=_expected(table[name]))
    for name, arg in sorted(table.items()):
        if arg['required'] and args.get(name) is None:
            raise exception.MissingArgument(
                name='%s of %s' % (name, op), reason=arg['help'])
