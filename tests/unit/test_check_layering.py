# SPDX-License-Identifier: Apache-2.0
"""tools/check-layering.py: the folder layering and, inside ucache/ and
migration/, the rule that no files call each other in a circle.  The script
runs for real, on small agent trees written in a temporary folder and on
the agent itself."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, 'tools', 'check-layering.py')

HEADER = '/* SPDX-License-Identifier: Apache-2.0 */\n'


def run(src):
    proc = subprocess.run(
        [sys.executable, CHECK, str(src)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True)
    return proc.returncode, proc.stdout, proc.stderr


def tree(tmp_path, files):
    """An agent source tree with every folder the layering knows."""
    src = tmp_path / 'src'
    for folder in ('control', 'migration', 'agent', 'ucache', 'dmcache',
                   'engine', 'alloc', 'nbd', 'origin', 'common'):
        (src / folder).mkdir(parents=True)
    for path, text in files.items():
        (src / path).write_text(HEADER + text)
    return src


def fn(name, body=''):
    return 'int\n%s(void)\n{\n  %s\n  return 0;\n}\n' % (name, body)


def test_the_agent_has_no_circle_of_files():
    rc, out, err = run(os.path.join(ROOT, 'fcache_agent', 'src'))
    assert (rc, err) == (0, '')
    assert 'no circle of files in ucache/, migration/' in out


def test_files_in_layers_pass(tmp_path):
    src = tree(tmp_path, {
        'ucache/top.c': fn('uc_top', 'uc_mid();'),
        'ucache/mid.c': fn('uc_mid', 'uc_low();'),
        'ucache/low.c': fn('uc_low'),
    })
    rc, _out, err = run(src)
    assert (rc, err) == (0, '')


def test_a_circle_of_calls_fails(tmp_path):
    src = tree(tmp_path, {
        'migration/a.c': fn('fc_a', 'fc_b();'),
        'migration/b.c': fn('fc_b', 'fc_c();'),
        'migration/c.c': fn('fc_c', 'fc_a();'),
        'migration/d.c': fn('fc_d', 'fc_a();'),
    })
    rc, _out, err = run(src)
    assert rc == 1
    assert 'migration/: a circle of 3 files' in err
    assert 'c.c -> a.c (fc_a)' in err
    # d.c uses the circle but is not on it.
    assert 'd.c ->' not in err


def test_a_function_taken_as_a_pointer_counts(tmp_path):
    # The fc_io_ops table names the request paths without calling them.
    src = tree(tmp_path, {
        'ucache/ops.c': fn('uc_ops_helper') + 'void *table[] = { uc_read };\n',
        'ucache/read.c': ('int\nuc_read(void)\n{\n'
                          '  return uc_ops_helper();\n}\n'),
    })
    rc, _out, err = run(src)
    assert rc == 1
    assert 'ops.c -> read.c (uc_read)' in err


def test_names_in_comments_strings_and_static_functions_do_not_count(tmp_path):
    src = tree(tmp_path, {
        'ucache/a.c': fn('uc_a', 'uc_b();'),
        # A comment naming uc_a, a string, and a static namesake of uc_a.
        'ucache/b.c': ('/* calls back into uc_a() */\n'
                       + fn('uc_b', 'log("uc_a");')
                       + 'static int\nuc_c(void)\n{\n  return 0;\n}\n'),
        'ucache/c.c': 'static int\nuc_a2(void)\n{\n  return uc_c();\n}\n',
    })
    rc, _out, err = run(src)
    assert (rc, err) == (0, '')


def test_other_folders_may_keep_circles(tmp_path):
    # Only ucache/ and migration/ are held to it (so far).
    src = tree(tmp_path, {
        'origin/a.c': fn('fc_a', 'fc_b();'),
        'origin/b.c': fn('fc_b', 'fc_a();'),
    })
    rc, _out, err = run(src)
    assert (rc, err) == (0, '')
