#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check that the agent's #include lines follow its layers.

fcache_agent/src has one folder per subsystem (doc/contributor/design.rst,
"Layers").  A file may include a header of its own folder, or the public
header of a folder its folder is allowed to use (ALLOWED below, the one place
where the layering is written down).  Everything else fails: an include that
climbs a layer, one that reaches into another folder's private header, a
folder missing from the table.

    tools/check-layering.py fcache_agent/src          # check; 1: a violation
    tools/check-layering.py --graph fcache_agent/src  # the folder graph

Inside the folders of NO_FILE_CIRCLES it also checks the files: no .c file
may use a function of another .c file of its folder that, through others
of the folder, uses one of its own (a circle of files).  A function counts
as used where its name appears, called or taken as a pointer.

The graph printed by --graph is the one shown in doc/contributor/design.rst.
"""
import argparse
import os
import re
import sys

# Folder -> the folders whose public headers it may include.  "." is
# src/ itself: main.c and the engine registration, which wire the layers
# together and so may use every one of them.
ALLOWED = {
    '.': {'control', 'migration', 'agent', 'engine', 'ucache', 'dmcache',
          'alloc', 'common'},
    'control': {'migration', 'agent', 'engine', 'common'},
    'migration': {'agent', 'engine', 'common'},
    'agent': {'engine', 'common'},
    'ucache': {'engine', 'alloc', 'nbd', 'origin', 'common'},
    'dmcache': {'engine', 'nbd', 'origin', 'common'},
    'engine': {'alloc', 'common'},
    'alloc': {'common'},
    'nbd': {'common'},
    'origin': {'common'},
    'common': set(),
}

# The headers other folders may include; every other header of a folder is
# private to it.  common/ is a set of small independent modules, each with
# its own header, so all of its headers are public.
PUBLIC = {
    'control': {'control.h', 'control_ops.h', 'metrics.h'},
    'migration': {'migration.h'},
    'agent': {'agent.h'},
    'engine': {'engine.h', 'volume.h'},
    'ucache': {'ucache_engine.h'},
    'dmcache': {'dm_engine.h'},
    'alloc': {'rws.h', 'predict.h', 'knee.h', 'share.h', 'staging.h',
              'victim.h', 'window_knee.h'},
    'nbd': {'nbd_server.h', 'io_ops.h'},
    'origin': {'origin.h', 'origin_policy.h', 'origin_move.h'},
}

# Programs beside the daemon (fcache_agent/<name>/, next to src/) built over
# some of its libraries, and the folders of src/ each may use: the same
# rules, from outside.  No folder of src/ may include one of them.
BESIDE = {
    'replay': {'alloc', 'common'},
}

# Folders whose .c files must form no circle among themselves: each file
# is below or above each other one it uses, so it can be read (and
# changed) knowing only the files below it.  ucache/'s data path calls
# the migration layer through ucache_layer.h's hook points only, and
# migration/ has migr_common.c at its bottom and migr_phases.c at its top.
NO_FILE_CIRCLES = ('ucache', 'migration')

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Comments, string and character literals: names in them use nothing.
NOT_CODE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|'
                      r"'(?:\\.|[^'\\\n])*'", re.S)
# A function definition in the code's style: its name at the start of a
# line, its parameters, then its body (a prototype ends with ';').
DEFINITION = re.compile(r'^([A-Za-z_]\w*)\([^;{]*\)\s*\{', re.M)
NAME = re.compile(r'\b[A-Za-z_]\w*\b')


def folders(src):
    found = {'.'}
    for name in os.listdir(src):
        if os.path.isdir(os.path.join(src, name)):
            found.add(name)
    return found


def sources(src):
    for folder in sorted(folders(src)):
        d = os.path.join(src, folder)
        for name in sorted(os.listdir(d)):
            if name.endswith(('.c', '.h')):
                yield folder, name, os.path.join(d, name)


def beside_sources(src):
    for folder in sorted(BESIDE):
        d = os.path.join(src, os.pardir, folder)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                if name.endswith(('.c', '.h')):
                    yield folder, name, os.path.join(d, name)


def includes(src, files=None):
    """(folder, file, included folder, included header) for every include."""
    for folder, name, path in (files if files is not None else sources(src)):
        with open(path) as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            if '/' in inc:
                to, header = inc.split('/', 1)
            else:
                to, header = folder, inc
            yield folder, name, to, header


def check(src):
    problems = []
    present = folders(src)
    for folder in sorted(present - set(ALLOWED)):
        problems.append('%s/: a folder the layering does not know; add it to '
                        'ALLOWED in %s' % (folder, sys.argv[0]))
    for folder, name, to, header in includes(src):
        where = os.path.normpath(os.path.join(folder, name))
        if to == folder:
            if not os.path.exists(os.path.join(src, folder, header)):
                problems.append('%s: includes "%s", not a header of %s/'
                                % (where, header, folder))
            continue
        if to not in ALLOWED.get(folder, set()):
            allowed = ', '.join(sorted(ALLOWED.get(folder, ()))) or 'nothing'
            problems.append('%s includes %s/%s: %s/ may not use %s/ '
                            '(allowed: %s)' % (where, to, header, folder, to,
                                               allowed))
        elif to in PUBLIC and header not in PUBLIC[to]:
            problems.append('%s includes %s/%s, a header private to %s/ '
                            '(public: %s)' % (where, to, header, to,
                                              ', '.join(sorted(PUBLIC[to]))))
    for folder, name, to, header in includes(src, beside_sources(src)):
        where = os.path.join(os.pardir, folder, name)
        if to == folder:
            continue
        if to not in BESIDE[folder]:
            problems.append('%s includes %s/%s: %s/ may use only %s'
                            % (where, to, header, folder,
                               ', '.join(sorted(BESIDE[folder]))))
        elif to in PUBLIC and header not in PUBLIC[to]:
            problems.append('%s includes %s/%s, a header private to %s/'
                            % (where, to, header, to))
    return problems


def graph(src):
    edges = {}
    for folder, _name, to, _header in includes(src):
        if to != folder:
            edges.setdefault(folder, set()).add(to)
    return edges


def file_graph(src, folder):
    """{file: {file it uses: [names]}} for the .c files of one folder."""
    defs, names = {}, {}
    d = os.path.join(src, folder)
    for name in sorted(os.listdir(d)):
        if not name.endswith('.c'):
            continue
        with open(os.path.join(d, name)) as f:
            code = NOT_CODE.sub(' ', f.read())
        for m in DEFINITION.finditer(code):
            line_before = code[:m.start()].rstrip('\n').rsplit('\n', 1)[-1]
            if 'static' not in line_before.split():
                defs[m.group(1)] = name
        names[name] = set(NAME.findall(code))
    edges = {}
    for name, used in names.items():
        for fn in sorted(used):
            to = defs.get(fn)
            if to and to != name:
                edges.setdefault(name, {}).setdefault(to, []).append(fn)
    return edges


def strong_components(edges):
    """Each circle of a graph, as a sorted list of its nodes (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def file_circles(src):
    """Problems: the circles of files inside the NO_FILE_CIRCLES folders."""
    problems = []
    for folder in NO_FILE_CIRCLES:
        if not os.path.isdir(os.path.join(src, folder)):
            continue
        edges = file_graph(src, folder)
        for part in strong_components(edges):
            uses = ['%s -> %s (%s)' % (a, b, ', '.join(edges[a][b]))
                    for a in part for b in sorted(edges.get(a, ()))
                    if b in part]
            problems.append('%s/: a circle of %d files, each using the next '
                            '(%s/ keeps its files in layers): %s'
                            % (folder, len(part), folder, '; '.join(uses)))
    return problems


def cycles(edges):
    """Folders on a circle of the include graph (empty when it has none)."""
    state, on_circle = {}, set()

    def visit(node, path):
        state[node] = 'open'
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 'open':
                on_circle.update(path[path.index(nxt):])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 'done'

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return on_circle


def print_graph(edges):
    order = [f for f in ALLOWED if f in edges or
             any(f in t for t in edges.values())]
    for folder in order:
        name = 'src/ (main.c)' if folder == '.' else folder + '/'
        uses = sorted(edges.get(folder, ()), key=list(ALLOWED).index)
        print('%-15s -> %s' % (name, ', '.join(u + '/' for u in uses) or '-'))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('src', help='the agent source folder (fcache_agent/src)')
    ap.add_argument('--graph', action='store_true',
                    help='print the folder include graph and exit')
    args = ap.parse_args()
    edges = graph(args.src)
    if args.graph:
        print_graph(edges)
        return 0
    problems = check(args.src)
    circle = cycles(edges)
    if circle:
        problems.append('the folder include graph has a circle through: %s'
                        % ', '.join(sorted(circle)))
    problems += file_circles(args.src)
    for p in problems:
        print('layering: ' + p, file=sys.stderr)
    if problems:
        print('layering: %d problem(s); the layers are in '
              'doc/contributor/design.rst'
              % len(problems), file=sys.stderr)
        return 1
    print('layering: %d folders, every include follows the layers; no circle '
          'of files in %s' % (len(folders(args.src)),
                              ', '.join(f + '/' for f in NO_FILE_CIRCLES)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
