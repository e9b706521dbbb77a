# SPDX-License-Identifier: Apache-2.0
"""doc/contributor/design.rst against the code it describes.

The folder graph it prints is the one tools/check-layering.py derives
from the agent's #include lines, and every folder of fcache_agent/src has
a row in its table.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DESIGN = os.path.join(ROOT, 'doc', 'contributor', 'design.rst')
SRC = os.path.join(ROOT, 'fcache_agent', 'src')


def _design():
    with open(DESIGN) as f:
        return f.read()


def test_folder_graph_is_the_checkers():
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'tools', 'check-layering.py'),
         '--graph', SRC], check=True, capture_output=True, text=True).stdout
    graph = [line.rstrip() for line in out.splitlines() if line.strip()]
    assert graph, 'check-layering.py --graph printed nothing'
    doc = _design()
    block = '\n'.join('    ' + line for line in graph)
    assert block in doc, (
        'doc/contributor/design.rst\'s folder graph differs from '
        'tools/check-layering.py --graph fcache_agent/src:\n' + out)


def test_every_folder_has_a_row():
    doc = _design()
    rows = set(re.findall(r'^``(\w+)/``', doc, re.M))
    folders = {d for d in os.listdir(SRC)
               if os.path.isdir(os.path.join(SRC, d))}
    assert folders <= rows, sorted(folders - rows)


def _python_files(*folders):
    for folder in folders:
        for top, _dirs, names in os.walk(os.path.join(ROOT, folder)):
            for name in names:
                if name.endswith('.py'):
                    yield os.path.join(top, name)


# An import of tests/ by name, or a sys.path entry that reaches into it.
_TESTS_IMPORT = re.compile(
    r'^\s*(?:from|import)\s+(?:tests|functional|uml)\b'
    r'|sys\.path\.\w+\(.*[\'"]tests[\'"]', re.M)


def test_bench_and_tools_import_nothing_of_tests():
    found = []
    for path in _python_files('bench', 'tools'):
        with open(path) as f:
            for m in _TESTS_IMPORT.finditer(f.read()):
                found.append('%s: %s' % (os.path.relpath(path, ROOT),
                                         m.group(0).strip()))
    assert not found, ('bench/ and tools/ import what they share with the '
                       'tests from fcache_testkit, not tests/: %s' % found)


def test_every_repository_folder_has_a_row():
    doc = _design()
    rows = set(re.findall(r'^``([\w/]+)/``', doc, re.M))
    for folder in ('bench', 'tools', 'tests', 'fcache_testkit',
                   'fcache_agent/tools', 'fcache_agent/replay',
                   'fcache_agent/fuzz', 'fcache_agent/tests',
                   'fcache_agent/src'):
        assert os.path.isdir(os.path.join(ROOT, folder)), folder
        assert folder in rows, '%s/ has no row in "Where things live"' % folder
