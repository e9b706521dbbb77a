# SPDX-License-Identifier: Apache-2.0
"""doc/reference/control.rst against the agent's table and the Python.

Every operation of the agent's table (control_ops.c) is in the reference
with the same permission, the reference names no other, and every one is
called somewhere in nova_ext (and nova_ext calls no other).
"""

import ast
import os
import re

from nova_ext import control_schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
OPS_C = os.path.join(ROOT, 'fcache_agent', 'src', 'control', 'control_ops.c')
DOC = os.path.join(ROOT, 'doc', 'reference', 'control.rst')
NOVA_EXT = os.path.join(ROOT, 'nova_ext')
PERMISSION = {'FC_CONTROL_READ': 'read', 'FC_CONTROL_ADMIN': 'admin'}


def _read(path):
    with open(path) as f:
        return f.read()


def agent_table():
    rows = re.findall(r'\{\s*"([a-z-]+)",\s*\w+,\s*(FC_CONTROL_\w+)',
                      _read(OPS_C))
    return {name: PERMISSION[perm] for name, perm in rows}


def doc_table():
    return dict(re.findall(r'^``([a-z-]+)``\s+(read|admin)\s', _read(DOC),
                           re.M))


def python_calls():
    called = set()
    for dirpath, _, files in os.walk(NOVA_EXT):
        for name in files:
            if name.endswith('.py'):
                called |= set(re.findall(
                    r"call\(\s*'([a-z-]+)'",
                    _read(os.path.join(dirpath, name))))
    return called


def test_the_agent_has_operations():
    assert len(agent_table()) > 20


def test_reference_is_the_agents_table():
    assert doc_table() == agent_table()


def test_the_schema_copy_has_the_same_operations_and_permissions():
    assert {op: e['access'] for op, e in
            control_schema.OPERATIONS.items()} == agent_table()


def test_python_calls_every_operation_and_no_other():
    assert python_calls() == set(agent_table())


def _keyword_calls(path):
    """(op, keyword names) of each ``.call('op', name=...)`` in path."""
    tree = ast.parse(_read(path))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and
                isinstance(node.func, ast.Attribute) and
                node.func.attr == 'call' and node.args and
                isinstance(node.args[0], ast.Constant) and
                isinstance(node.args[0].value, str)):
            yield node.args[0].value, [k.arg for k in node.keywords
                                       if k.arg is not None]


def test_python_calls_name_only_arguments_the_agent_takes():
    """Every argument named at a call site is in the agent's table.

    (Arguments passed as ``**args`` are checked when the call runs, by
    nova_ext.control_check.)
    """
    wrong = []
    for dirpath, _, files in os.walk(NOVA_EXT):
        for name in files:
            if not name.endswith('.py'):
                continue
            path = os.path.join(dirpath, name)
            for op, names in _keyword_calls(path):
                takes = control_schema.OPERATIONS[op]['arguments']
                wrong += ['%s: %s %s' % (os.path.relpath(path, ROOT), op, n)
                          for n in names if n not in takes]
    assert wrong == []


def test_the_reference_lists_the_arguments_from_the_schema():
    assert '.. fcache-control-arguments::' in _read(DOC)
