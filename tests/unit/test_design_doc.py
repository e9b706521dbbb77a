# SPDX-License-Identifier: Apache-2.0
"""doc/contributor/design.rst against the code it describes.

The folder graph it prints is the one tools/check-layering.py derives
from the agent's #include lines, and every folder of fcache_agent/src has
a row in its table; its lists of what adding an engine, a strategy or an
origin type touches are complete for every one the code has; and no page
of doc/ names a repository file that is missing.
"""

import glob
import os
import re
import subprocess
import sys

from tests.unit import tool_module

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


# ---------------------------------------------------------------------------
# "Adding an engine, a strategy, an origin type": the lists name files that
# exist, and the code has no engine, strategy or origin type that misses a
# step of its list.
# ---------------------------------------------------------------------------

AGENT = os.path.join(ROOT, 'fcache_agent')


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def _adding_section():
    doc = _design()
    start = doc.index('Adding an engine, a strategy, an origin type\n===')
    end = doc.index('\nWhere things live\n===', start)
    return doc[start:end]


def _layering():
    return tool_module.load('check_layering', 'check-layering.py')


def _exists(ref):
    """A path of the lists, from fcache_agent/src or from the top.

    A <placeholder> stands for any name.
    """
    pattern = re.sub(r'<\w+>', '*', ref.rstrip('/'))
    for base in (SRC, ROOT):
        if glob.glob(os.path.join(base, pattern)):
            return True
    return False


def test_adding_lists_name_only_files_that_exist():
    section = _adding_section()
    refs = [r for r in re.findall(r'``([^`\s]+)``', section)
            if '/' in r or re.search(r'\.(c|h|py|cfg|sample)$', r)]
    assert len(refs) > 20, refs
    missing = [r for r in refs if not _exists(r)]
    assert not missing, missing


def _strategy_table():
    """(enum suffix, name) in engine/strategy.c's table, in its order."""
    return re.findall(r'\[FC_STRAT_(\w+)\]\s*=\s*&fc_strategy_(\w+),',
                      _read('fcache_agent', 'src', 'engine', 'strategy.c'))


def test_every_strategy_has_each_step_of_its_list():
    from nova_ext import opts
    from nova_ext import vocabulary

    table = _strategy_table()
    assert len(table) >= 6, table
    header = _read('fcache_agent', 'src', 'engine', 'strategy.h')
    enum = re.search(r'enum fc_strategy \{(.*?)\};', header, re.S).group(1)
    in_enum = re.findall(r'FC_STRAT_(\w+)', enum)
    entry_points = re.search(r'^fcache\.strategies =\n((?:\s+.+\n)+)',
                             _read('setup.cfg'), re.M).group(1)
    plugins = re.findall(r'^\s+(\w+) = nova_ext\.strategies\.builtin:',
                         entry_points, re.M)
    builtin = re.findall(r"^    name = '(\w+)'",
                         _read('nova_ext', 'strategies', 'builtin.py'), re.M)
    helped = [name for name, _help in opts.STRATEGIES]
    names = []
    for suffix, name in table:
        names.append(name)
        assert suffix == name.upper(), (suffix, name)
        path = os.path.join(SRC, 'engine', 'strategy_%s.c' % name)
        assert os.path.exists(path), 'no engine/strategy_%s.c' % name
        with open(path) as f:
            assert '.name = "%s"' % name in f.read(), path
        assert ('extern const struct fc_strategy_desc fc_strategy_%s;'
                % name) in header, name
        for where, listed in (('setup.cfg fcache.strategies', plugins),
                              ('nova_ext/strategies/builtin.py', builtin),
                              ('nova_ext/opts.py STRATEGIES', helped)):
            assert name in listed, '%s is not in %s' % (name, where)
    # In the enum's order, and nothing the table lacks.
    assert [s.lower() for s in in_enum if s != 'COUNT'] == names
    assert tuple(names) == vocabulary.STRATEGIES
    files = sorted(os.path.basename(p)[len('strategy_'):-2] for p in
                   glob.glob(os.path.join(SRC, 'engine', 'strategy_*.c')))
    assert files == sorted(names), 'a strategy_*.c outside the table'


def test_every_engine_has_each_step_of_its_list():
    layering = _layering()
    engines = _read('fcache_agent', 'src', 'engines.c')
    symbols = re.findall(r'&(fc_\w+)', re.search(
        r'all\[\] = \{(.*?)\}', engines, re.S).group(1))
    assert len(symbols) >= 2, symbols
    layers = re.search(r'^LAYERS := (.*)$', _read('fcache_agent', 'Makefile'),
                       re.M).group(1).split()
    config = _read('fcache_agent', 'src', 'common', 'config.c')
    sample = _read('etc', 'fcache', 'agent.conf.sample')
    rows = set(re.findall(r'^``(\w+)/``', _design(), re.M))
    for sym in symbols:
        decl = 'extern const struct fc_engine_ops %s;' % sym
        headers = [p for p in glob.glob(os.path.join(SRC, '*', '*.h'))
                   if decl in open(p).read()]
        assert len(headers) == 1, (sym, headers)
        folder = os.path.basename(os.path.dirname(headers[0]))
        header = os.path.basename(headers[0])
        name = None
        for path in glob.glob(os.path.join(SRC, folder, '*.c')):
            m = re.search(r'const struct fc_engine_ops %s = \{.*?\.name = '
                          r'"(\w+)"' % sym, open(path).read(), re.S)
            name = name or (m and m.group(1))
        assert name, 'no .name in the ops %s' % sym
        assert 'strcmp(v, "%s")' % name in config, name
        assert '"%s"' % name in sample, name
        assert folder in layers, folder
        assert layers.index('agent') < layers.index(folder) < \
            layers.index('engine'), layers
        assert folder in layering.ALLOWED, folder
        assert folder in layering.ALLOWED['.'], folder
        assert header in layering.PUBLIC.get(folder, ()), (folder, header)
        assert folder in rows, folder


def test_every_origin_type_has_each_step_of_its_list():
    header = _read('fcache_agent', 'src', 'origin', 'origin.h')
    dispatch = _read('fcache_agent', 'src', 'origin', 'origin.c')
    types = re.findall(r'\bfc_origin_open_(\w+)\(', header)
    assert sorted(types) == ['nbd', 'path', 'rbd'], types
    for t in types:
        path = os.path.join(SRC, 'origin', 'origin_%s.c' % t)
        assert os.path.exists(path), path
        with open(path) as f:
            assert re.search(r'^fc_origin_open_%s\(' % t, f.read(), re.M), t
        assert 'return fc_origin_open_%s(' % t in dispatch, t


# ---------------------------------------------------------------------------
# doc/ names no repository file that is missing.
# ---------------------------------------------------------------------------

# Paths in doc/ that are not files of this repository: upstream Nova and
# Cinder, an installed or a running system's, benchmark outputs.
_NOT_OURS = ('cinder/', 'nova/__init__.py', 'nova/virt/__init__.py',
             'results/', 'state_dir/', 'fcache/agent.conf', 'PREFIX/',
             'BOX/')
_DOC_PATH = re.compile(
    r'(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.(?:c|h|py|rst|sh|cfg|ini|toml|txt'
    r'|conf|sample|service|json|md|yaml)|(?:[\w.-]+/){2,})(?![\w/])')
_DOC_BASES = ('', 'fcache_agent', 'fcache_agent/src', 'tests', 'doc')


def test_docs_name_only_files_that_exist():
    missing = []
    for top, dirs, names in os.walk(os.path.join(ROOT, 'doc')):
        dirs[:] = [d for d in dirs if not d.startswith(('_', '.'))]
        for name in names:
            if not name.endswith('.rst'):
                continue
            with open(os.path.join(top, name)) as f:
                text = f.read()
            for literal in re.findall(r'``([^`]+)``', text):
                if '://' in literal:
                    continue
                for ref in _DOC_PATH.findall(literal):
                    if (re.search(r'[<>*{}$]', ref) or
                            ref.startswith(('/', '.') + _NOT_OURS)):
                        continue
                    if not any(os.path.exists(os.path.join(ROOT, b, ref))
                               for b in _DOC_BASES) and \
                            not os.path.exists(os.path.join(top, ref)):
                        missing.append('%s: %s' % (
                            os.path.relpath(os.path.join(top, name), ROOT),
                            ref))
    assert not missing, missing
