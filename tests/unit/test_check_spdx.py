# SPDX-License-Identifier: Apache-2.0
"""tools/check-spdx.py: the CI check that every source file names its
licence.  The script runs for real, on files written in a temporary tree
(a path list) and on the repository itself (git ls-files)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, 'tools', 'check-spdx.py')

C_LINE = '/* SPDX-License-Identifier: Apache-2.0 */\n'
HASH_LINE = '# SPDX-License-Identifier: Apache-2.0\n'


def check(tree, files):
    """Write files ({path: text}) under tree; the check's (rc, paths)."""
    for path, text in files.items():
        full = tree / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text)
    proc = subprocess.run(
        [sys.executable, CHECK] + sorted(files), cwd=str(tree),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True)
    assert proc.stderr == ''
    reported = [line.split(':', 1)[0] for line in proc.stdout.splitlines()]
    return proc.returncode, reported


def test_the_repository_is_clean():
    # Every tracked source file carries the line: a new file without it
    # fails here before CI's Operations section.
    proc = subprocess.run(
        [sys.executable, CHECK], cwd=ROOT, stdout=subprocess.PIPE,
        universal_newlines=True)
    assert (proc.returncode, proc.stdout) == (0, '')


@pytest.mark.parametrize('path,text', [
    ('src/a.c', '#include <stdio.h>\n'),
    ('src/a.h', '#pragma once\n'),
    ('pkg/mod.py', '"""Doc."""\n'),
    ('pkg/__init__.py', 'import os\n'),
    ('tools/x.sh', '#!/bin/bash\nset -e\n'),
    ('tests/x.bats', '#!/usr/bin/env bats\n'),
    ('tests/x.bash', '# shellcheck shell=bash\nX=1\n'),
    ('tools/runner', '#!/bin/sh\necho hi\n'),           # by its shebang
    ('sub/Makefile', 'all:\n'),
    ('devstack/settings', 'FCACHE_X=1\n'),               # by its name
    ('etc/x.service', '[Unit]\n'),
    ('etc/x.service.d/y.conf', '[Service]\n'),
    ('etc/rules.yml', 'groups: []\n'),
    ('tox.ini', '[tox]\n'),
    ('setup.cfg', '[metadata]\n'),
    ('etc/fcache/agent.conf.sample', '[agent]\n'),
    ('doc/conf.py', 'project = "x"\n'),                  # doc/'s code
    ('doc/_ext/ext.py', 'import os\n'),
])
def test_a_file_without_the_line_is_reported(tmp_path, path, text):
    assert check(tmp_path, {path: text}) == (1, [path])


@pytest.mark.parametrize('path,text', [
    ('src/a.c', C_LINE + '#include <stdio.h>\n'),
    ('pkg/mod.py', HASH_LINE + '"""Doc."""\n'),
    ('bin/tool.py', '#!/usr/bin/env python3\n' + HASH_LINE),
    ('pkg/old.py', '# -*- coding: utf-8 -*-\n' + HASH_LINE),
    ('tools/x.sh', '#!/bin/bash\n' + HASH_LINE + 'set -e\n'),
    ('tests/x.bash', '# shellcheck shell=bash\n' + HASH_LINE),
    ('sub/Makefile', HASH_LINE + 'all:\n'),
])
def test_a_file_with_the_line_in_its_header_passes(tmp_path, path, text):
    assert check(tmp_path, {path: text}) == (0, [])


@pytest.mark.parametrize('path,text', [
    # The line must be the header, not a mention further down ...
    ('pkg/mod.py', '"""Doc."""\n' + HASH_LINE),
    ('tools/x.sh', '#!/bin/bash\n# Does x.\n' + HASH_LINE),
    # ... and in the file's own comment syntax.
    ('src/a.c', '// SPDX-License-Identifier: Apache-2.0\n'),
    ('src/b.c', HASH_LINE),
    ('pkg/other.py', '# SPDX-License-Identifier: MIT\n'),
])
def test_a_misplaced_or_misspelt_line_is_reported(tmp_path, path, text):
    assert check(tmp_path, {path: text}) == (1, [path])


@pytest.mark.parametrize('path,text', [
    ('pkg/__init__.py', ''),        # H104: nothing but comments is refused
    ('releasenotes/notes/x-0123456789abcdef.yaml', '---\nfixes: []\n'),
    ('doc/admin/guide.rst', 'Guide\n=====\n'),
    ('doc/_ext/data.yaml', 'a: 1\n'),
    ('fcache_agent/fuzz/corpus/nbd/seed', '#!not a script\n'),
    ('tests/unit/fixtures/volume_show.json', '{}\n'),
    ('etc/fcache/fcache.conf.sample', '[DEFAULT]\n'),   # generated
    ('debian/changelog', 'fcache (0.1) unstable; urgency=low\n'),
    ('data.json', '{}\n'),
    ('README.rst', 'fcache\n'),
])
def test_excluded_and_non_source_files_are_not_checked(tmp_path, path, text):
    assert check(tmp_path, {path: text}) == (0, [])


def test_only_the_files_lacking_the_line_are_listed(tmp_path):
    assert check(tmp_path, {
        'a.c': C_LINE, 'b.c': '', 'c.py': HASH_LINE, 'd.py': 'x = 1\n',
    }) == (1, ['b.c', 'd.py'])
