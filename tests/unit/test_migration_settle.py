# SPDX-License-Identifier: Apache-2.0
"""nova_ext.migration.settle: the order of the relay between two agents.

The agents' side is tested for real in
tests/functional/test_migration_faults.py; these tests pin down what the
orchestrator itself decides, with scripted agents standing in for the
control sockets (more than 4096 blocks, which the functional volumes never
reach, and failures at each step).
"""

import pytest

from nova_ext import exception
from nova_ext import migration

MID = 'm-1'


class ScriptedAgent(object):
    """Answers migration-settle like an agent holding ``blocks``."""

    def __init__(self, name, log, mode=None, blocks=(), missing=()):
        self.name = name
        self.log = log
        self.mode = mode
        self.blocks = sorted(blocks)
        self.missing = set(missing)

    def call(self, op, **args):
        assert op == 'migration-settle'
        assert args['migration_id'] == MID and args['volume_id'] == 'vol1'
        step = args['step']
        self.log.append((self.name, step, len(args.get('blocks', ()))))
        if step == 'list':
            after = args.get('after', -1)
            rest = [b for b in self.blocks if b > after]
            page = rest[:args['limit']]
            return {'mode': self.mode, 'total': len(self.blocks),
                    'blocks': page, 'more': len(rest) > len(page)}
        if step == 'end':
            lost = len(self.blocks) if args['source'] == 'lost' else 0
            return {'mode': self.mode, 'given_up_blocks': lost}
        if step in ('writeback', 'drop'):
            return {'done': len(args['blocks']),
                    'missing': [b for b in args['blocks']
                                if b in self.missing]}
        assert step == 'release'
        self.rest = args['rest']
        return {'rest': args['rest']}


def agents(mode, blocks, missing=()):
    log = []
    return (ScriptedAgent('src', log, missing=missing),
            ScriptedAgent('dst', log, mode=mode, blocks=blocks), log)


def test_missing_mode_writes_back_in_chunks_then_releases_then_ends():
    src, dst, log = agents('missing', range(0, 2 * 9000, 2))
    res = migration.settle(src, dst, MID, 'vol1')
    assert res == {'mode': 'missing', 'blocks': 9000, 'given_up_blocks': 0}
    assert [e for e in log if e[0] == 'src'] == [
        ('src', 'writeback', 4096), ('src', 'writeback', 4096),
        ('src', 'writeback', 808), ('src', 'release', 0)]
    assert src.rest == 'drop'
    # The destination may let the origin answer only after the source
    # has written back and released.
    assert log[-2:] == [('src', 'release', 0), ('dst', 'end', 0)]


def test_held_mode_drops_listed_and_writes_back_the_rest():
    src, dst, log = agents('held', [5, 7])
    res = migration.settle(src, dst, MID, 'vol1')
    assert res['mode'] == 'held'
    assert ('src', 'drop', 2) in log
    assert src.rest == 'writeback'
    assert log[-1] == ('dst', 'end', 0)


def test_completed_mode_only_releases():
    src, dst, log = agents('completed', [])
    migration.settle(src, dst, MID, 'vol1')
    assert [e[1] for e in log] == ['list', 'release', 'end']
    assert src.rest == 'drop'


def test_block_missing_on_source_releases_nothing():
    src, dst, log = agents('missing', [1, 2, 3], missing=[2])
    with pytest.raises(exception.MigrationFailed) as ei:
        migration.settle(src, dst, MID, 'vol1')
    assert '1 blocks the destination needs' in str(ei.value)
    assert 'first: 2' in str(ei.value)
    assert not any(step in ('release', 'end') for _, step, _ in log)


def test_source_lost_only_ends_the_destination():
    src, dst, log = agents('missing', [1, 2, 3])
    res = migration.settle(src, dst, MID, 'vol1', source_lost=True)
    assert res['given_up_blocks'] == 3
    assert log == [('dst', 'end', 0)]
