# SPDX-License-Identifier: Apache-2.0
"""doc/reference/control.rst against the agent's table and the Python.

Every operation of the agent's table (control_ops.c) is in the reference
with the same permission, the reference names no other, and every one is
called somewhere in nova_ext (and nova_ext calls no other).
"""

import os
import re

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


def test_python_calls_every_operation_and_no_other():
    assert python_calls() == set(agent_table())
