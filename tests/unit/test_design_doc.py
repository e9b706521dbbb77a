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
