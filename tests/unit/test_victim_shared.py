# SPDX-License-Identifier: Apache-2.0
"""The agent and fcache-replay choose a replacement victim with one piece
of code, alloc/victim's fc_victim_pick, not two that agree today.

doc/research/replay.rst promises that the replayer is not a second
implementation of the policy.  This holds it to that at the link: the
object of the agent's pool (ucache/pool.c) and that of the replayer's
cache (replay/cache.c) must each call fc_victim_pick, and only
alloc/victim.c may define it.  A call site that chose by itself again
would no longer need the symbol and fails here."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
AGENT = os.path.join(ROOT, 'fcache_agent')
ASAN = os.path.join(AGENT, 'build', 'asan')
POOL = os.path.join('build', 'asan', 'obj', 'ucache', 'pool.o')
CACHE = os.path.join('build', 'asan', 'replay', 'cache.o')
VICTIM = os.path.join('build', 'asan', 'obj', 'alloc', 'victim.o')
SYMBOL = 'fc_victim_pick'


def build(*objects):
    # make rebuilds only what is stale: the objects of `make asan` and
    # `make check`, which CI builds before the Python tests anyway.
    subprocess.check_call(['make', '-s', '-C', AGENT] + list(objects))


def symbols(obj, *flags):
    out = subprocess.check_output(
        ['nm'] + list(flags) + [os.path.join(AGENT, obj)],
        universal_newlines=True)
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def test_agent_and_replayer_call_the_one_victim_rule():
    build(POOL, CACHE, VICTIM)
    assert SYMBOL in symbols(POOL, '--undefined-only')
    assert SYMBOL in symbols(CACHE, '--undefined-only')
    assert SYMBOL in symbols(VICTIM, '--defined-only')


def test_nothing_else_defines_the_victim_rule():
    build(POOL, CACHE, VICTIM)
    definers = []
    for folder, _dirs, files in os.walk(ASAN):
        for name in files:
            if not name.endswith('.o'):
                continue
            path = os.path.relpath(os.path.join(folder, name), AGENT)
            if any(s.startswith('fc_victim_')
                   for s in symbols(path, '--defined-only')):
                definers.append(path)
    assert definers == [VICTIM]
