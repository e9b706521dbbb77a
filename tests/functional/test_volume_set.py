# SPDX-License-Identifier: Apache-2.0
"""volume-set: an attached volume's write policy changes while its VM runs.

Leaving write_back, the agent writes every dirty block back before it
answers, and a write acknowledged after the answer is at the origin: the
origin's file, read directly (no detach), equals the oracle of every
acknowledged write.  An origin that fails the write-back leaves the old
policy in place and loses nothing.  The new policy survives a restart of
the agent, clean or not.  A migrating volume, bad values and a cache size
change are refused, changing nothing.
"""

import errno
import json
import os
import threading

from prometheus_client import parser
import pytest

from nova_ext import exception

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

from .conftest import attach_and_connect

MiB = 1 << 20
BS = 4096
VOLUME_SIZE = 16 * MiB
VOLUME_CACHE = 8 * MiB
# Write-back only when asked: dirty blocks stay until volume-set.
HOLD_DIRTY = {'writeback_interval_ms': 3600000, 'dirty_high_percent': 100}


def set_policy(agent, policy, volume_id='vol1', **kw):
    return agent.client(timeout=120).set_volume(volume_id,
                                                write_policy=policy, **kw)


def set_error(agent, volume_id='vol1', **kw):
    with pytest.raises(exception.AgentError) as info:
        agent.client(timeout=120).set_volume(volume_id, **kw)
    return info.value


def state_file(agent, volume_id='vol1'):
    path = os.path.join(agent.state_dir, 'volumes', volume_id + '.json')
    with open(path) as f:
        return json.load(f)


def state_file_policy(agent, volume_id='vol1'):
    return state_file(agent, volume_id)['write_policy']


def write_blocks(h, orc, first, n, byte):
    data = bytes([byte]) * (n * BS)
    h.pwrite(data, first * BS)
    orc.write(first * BS, data)


def failing_origin(make_origin, workdir):
    """An origin whose writes fail while the returned flag file exists."""
    flag = os.path.join(workdir, 'fail-writes')
    return make_origin(VOLUME_SIZE, filters=['error'],
                       filter_args=['error-pwrite-rate=100%',
                                    'error-pwrite-file=' + flag]), flag


def origin_mismatch(orc, origin, what):
    return om.compare(orc, origin.read_file(), what)


class Writer(object):
    """The guest: an oracle workload on its own thread until stop()."""

    def __init__(self, h, orc, seed):
        self.work = om.Workload(h, orc, seed=seed, depth=8)
        self.failures = []
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.work.run(stop=self.halt, timeout=180)
        except Exception as exc:       # reported by stop()
            self.failures.append(exc)

    def ops(self):
        return sum(n for kind, n in self.work.counts.items() if kind != 'fua')

    def stop(self):
        self.halt.set()
        self.thread.join(180)
        assert not self.thread.is_alive(), 'the writer did not stop'
        assert not self.failures, self.failures
        self.work.assert_clean()
        assert not self.work.inflight


@pytest.mark.parametrize('to', ['write_through', 'read_only'])
def test_leaving_write_back_under_writes(make_agent, make_origin, to):
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**HOLD_DIRTY).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 0, 64, 0x11)
    assert agent.show('vol1')['dirty_blocks'] == 64
    writer = Writer(h, orc, seed=5)
    harness.wait_for(lambda: writer.ops() > 300, 60,
                     'the guest to write under write_back')
    # (Its trims and zeroes may have dropped some dirty blocks.)
    assert agent.show('vol1')['dirty_blocks'] > 0

    res = set_policy(agent, to)
    assert res['write_policy'] == to
    assert res['previous_write_policy'] == 'write_back'
    assert res['dirty_blocks_written'] > 0
    assert agent.show('vol1')['dirty_blocks'] == 0
    # The guest kept writing through the change; let it go on under the
    # new policy, then stop it.
    done = writer.ops()
    harness.wait_for(lambda: writer.ops() > done + 300, 60,
                     'the guest to write under ' + to)
    writer.stop()

    show = agent.show('vol1')
    assert show['write_policy'] == to
    assert show['dirty_blocks'] == 0
    assert 'writeback' not in show
    assert state_file_policy(agent) == to
    # Every acknowledged write is at the origin, without a detach.
    assert not origin_mismatch(orc, origin, 'origin after the change')
    # A later write goes through at once.
    write_blocks(h, orc, 100, 3, 0x5e)
    assert agent.show('vol1')['dirty_blocks'] == 0
    assert not origin_mismatch(orc, origin, 'origin after a later write')
    assert not om.verify_all(h, orc, 'read back')
    om.close(h)
    assert 'write policy write_back -> %s' % to in agent.log()


@pytest.mark.parametrize('start', ['write_through', 'read_only'])
def test_entering_write_back(make_agent, make_origin, start):
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**HOLD_DIRTY).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy=start)
    orc = om.Oracle(origin.content)
    writer = Writer(h, orc, seed=9)
    harness.wait_for(lambda: writer.ops() > 300, 60,
                     'the guest to write under ' + start)
    res = set_policy(agent, 'write_back')
    assert res == {'volume_id': 'vol1', 'write_policy': 'write_back',
                   'previous_write_policy': start, 'dirty_blocks_written': 0,
                   'cache_size': VOLUME_CACHE,
                   'previous_cache_size': VOLUME_CACHE, 'blocks_evicted': 0}
    done = writer.ops()
    harness.wait_for(lambda: writer.ops() > done + 300, 60,
                     'the guest to write under write_back')
    writer.stop()
    # Whole blocks written now stay in the cache, dirty.
    before = origin.read_file()[200 * BS:204 * BS]
    write_blocks(h, orc, 200, 4, 0x6d)
    show = agent.show('vol1')
    assert show['write_policy'] == 'write_back'
    assert show['writeback'] == 'running'
    assert show['dirty_blocks'] >= 4
    assert origin.read_file()[200 * BS:204 * BS] == before
    assert state_file_policy(agent) == 'write_back'
    assert not om.verify_all(h, orc, 'read back')
    om.close(h)
    agent.detach('vol1')
    assert not origin_mismatch(orc, origin, 'origin after the detach')


def test_failed_write_back_keeps_the_old_policy(make_agent, make_origin,
                                                workdir):
    origin, flag = failing_origin(make_origin, workdir)
    agent = make_agent(**HOLD_DIRTY).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 10, 32, 0x2b)
    write_blocks(h, orc, 500, 8, 0x3c)
    assert agent.show('vol1')['dirty_blocks'] == 40

    open(flag, 'w').close()
    exc = set_error(agent, write_policy='write_through')
    assert exc.errno == errno.EIO, exc
    assert 'stays write_back and loses nothing' in str(exc), exc
    show = agent.show('vol1')
    assert show['write_policy'] == 'write_back'
    assert show['writeback'] == 'running'
    assert show['dirty_blocks'] == 40
    assert state_file_policy(agent) == 'write_back'
    # Still write_back: a whole block written now lands in the cache.
    write_blocks(h, orc, 700, 1, 0x4d)
    assert agent.show('vol1')['dirty_blocks'] == 41
    assert not om.verify_all(h, orc, 'read back after the failure')

    os.unlink(flag)
    res = set_policy(agent, 'write_through')
    assert res['dirty_blocks_written'] == 41
    assert agent.show('vol1')['dirty_blocks'] == 0
    assert not origin_mismatch(orc, origin, 'origin once it healed')
    om.close(h)


@pytest.mark.parametrize('crash', [False, True])
def test_restart_keeps_the_new_policy(make_agent, make_origin, crash):
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**HOLD_DIRTY).start()
    res, h = attach_and_connect(agent, 'vol1', origin,
                                cache_size=VOLUME_CACHE,
                                write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 0, 16, 0x71)
    set_policy(agent, 'write_through')
    om.close(h)
    if crash:
        agent.kill()
        agent.start()
    else:
        agent.restart()
    show = agent.show('vol1')
    assert show['write_policy'] == 'write_through'
    assert show['dirty_blocks'] == 0
    h = om.connect(res['export_uri'])
    write_blocks(h, orc, 40, 4, 0x72)
    assert agent.show('vol1')['dirty_blocks'] == 0
    assert not origin_mismatch(orc, origin, 'origin, write_through kept')

    # And back: write_back survives the restart with its dirty blocks.
    set_policy(agent, 'write_back')
    write_blocks(h, orc, 80, 4, 0x73)
    om.close(h)
    if crash:
        agent.kill()
        agent.start()
    else:
        agent.restart()
    show = agent.show('vol1')
    assert show['write_policy'] == 'write_back'
    assert show['dirty_blocks'] >= 4
    h = om.connect(res['export_uri'])
    assert not om.verify_all(h, orc, 'read back after the restart')
    om.close(h)
    agent.detach('vol1')
    assert not origin_mismatch(orc, origin, 'origin after the detach')


def test_held_write_back_is_refused(make_agent, make_origin):
    """Dirty blocks recovered after a crash are not the change's to send."""
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**HOLD_DIRTY).start()
    res, h = attach_and_connect(agent, 'vol1', origin,
                                cache_size=VOLUME_CACHE,
                                write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 0, 8, 0x19)
    om.close(h)
    agent.kill()
    agent.start()
    assert agent.show('vol1')['writeback'] == 'held'
    exc = set_error(agent, write_policy='write_through')
    assert exc.errno == errno.EBUSY, exc
    assert 'volume-claim' in str(exc), exc
    assert agent.show('vol1')['write_policy'] == 'write_back'
    # Claimed, the thread writes them back (perhaps before the change).
    agent.client().claim_volume('vol1')
    assert set_policy(agent, 'write_through')['write_policy'] == \
        'write_through'
    assert agent.show('vol1')['dirty_blocks'] == 0
    assert not origin_mismatch(orc, origin, 'origin after the claim')


def test_refused_while_migrating(make_agent, make_origin):
    origin = make_origin(VOLUME_SIZE)
    src, dst = mu.agent_pair(make_agent)
    src.attach('vol1', origin.uri, cache_size=VOLUME_CACHE,
               write_policy='write_back')
    prep = mu.manual_prepare(src, dst, 'vol1', 'hybrid')
    for agent in (src, dst):
        exc = set_error(agent, write_policy='write_through')
        assert exc.errno == errno.EBUSY, exc
        assert 'is migrating' in str(exc), exc
        for size in (VOLUME_CACHE // 2, VOLUME_CACHE + MiB):
            exc = set_error(agent, cache_size=size)
            assert exc.errno == errno.EBUSY, exc
            assert 'change its policy or cache size once the migration has ' \
                'finished' in str(exc), exc
        show = agent.show('vol1')
        assert show['write_policy'] == 'write_back'
        assert show['cache_size'] == VOLUME_CACHE
        assert state_file(agent)['cache_size'] == VOLUME_CACHE
        assert state_file_policy(agent) == 'write_back'
    src.client().call('migration-abort',
                      migration_id=prep['migration_id'])
    assert set_policy(src, 'write_through')['write_policy'] == 'write_through'


def test_refused_while_the_origin_moves(make_agent, make_origin):
    a = make_origin(VOLUME_SIZE, name='A')
    b = make_origin(VOLUME_SIZE, name='B')
    agent = make_agent(**HOLD_DIRTY).start()
    _, h = attach_and_connect(agent, 'vol1', a, cache_size=VOLUME_CACHE,
                              write_policy='write_back')
    orc = om.Oracle(a.content)
    write_blocks(h, orc, 0, 8, 0x5a)
    client = agent.client()
    # 1 MB/s: the copy of 16 MiB is still running when volume-set asks.
    client.call('volume-move', volume_id='vol1', to=b.uri, scheme='dbt',
                rate_limit_mbps=1)
    exc = set_error(agent, write_policy='write_through')
    assert exc.errno == errno.EBUSY, exc
    assert 'a storage move of volume vol1 is running' in str(exc), exc
    exc = set_error(agent, cache_size=VOLUME_CACHE // 2)
    assert exc.errno == errno.EBUSY, exc
    assert 'a storage move of volume vol1 is running' in str(exc), exc
    show = agent.show('vol1')
    assert show['write_policy'] == 'write_back'
    assert show['cache_size'] == VOLUME_CACHE
    assert show['dirty_blocks'] == 8
    assert show['move']['state'] == 'copying', show['move']
    client.call('volume-move-abort', volume_id='vol1')
    harness.wait_for(
        lambda: agent.show('vol1')['move']['state'] == 'aborted', 30,
        'the move to be aborted')
    assert set_policy(agent, 'write_through')['dirty_blocks_written'] == 8
    assert not origin_mismatch(orc, a, 'origin A after the change')
    om.close(h)


def test_bad_values_change_nothing(make_agent, make_origin):
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**HOLD_DIRTY).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 0, 4, 0x44)
    client = agent.client(unchecked=True)

    def refused(expect_errno, text, **args):
        with pytest.raises(exception.AgentError) as info:
            client.call('volume-set', **args)
        assert info.value.errno == expect_errno, info.value
        assert text in str(info.value), info.value

    refused(errno.EINVAL, "'write_around' is not one of", volume_id='vol1',
            write_policy='write_around')
    refused(errno.EINVAL, "argument 'write_policy' of 'volume-set' must be "
            "a string",
            volume_id='vol1', write_policy=2)
    refused(errno.EINVAL, 'nothing to set', volume_id='vol1')
    refused(errno.EINVAL, "argument 'cache_size' of 'volume-set' must be a "
            "positive size",
            volume_id='vol1', cache_size=-1)
    refused(errno.EINVAL, "missing argument 'volume_id'",
            write_policy='write_through')
    refused(errno.ENOENT, 'not attached', volume_id='nope',
            write_policy='write_through')
    # A cache size that is not whole cache blocks is refused, and the
    # policy given with it not set.
    refused(errno.EINVAL, 'is not a multiple of the cache block (4096 '
            'bytes', volume_id='vol1', write_policy='write_through',
            cache_size=4 * MiB + 512)
    with pytest.raises(exception.InvalidArgument):
        agent.client().set_volume('vol1', write_policy='write_around')
    show = agent.show('vol1')
    assert show['write_policy'] == 'write_back'
    assert show['dirty_blocks'] == 4
    assert state_file_policy(agent) == 'write_back'
    # The size it has, and the policy it has: nothing to do.
    assert set_policy(agent, 'write_back', cache_size=VOLUME_CACHE) == {
        'volume_id': 'vol1', 'write_policy': 'write_back',
        'previous_write_policy': 'write_back', 'dirty_blocks_written': 0,
        'cache_size': VOLUME_CACHE, 'previous_cache_size': VOLUME_CACHE,
        'blocks_evicted': 0}
    assert state_file(agent)['cache_size'] == VOLUME_CACHE
    assert agent.show('vol1')['dirty_blocks'] == 4
    om.close(h)


def test_cli(make_agent, make_origin):
    """``fcache volume-set`` against the real agent, as a subprocess."""
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**HOLD_DIRTY).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 0, 12, 0x3f)
    sock = ['--socket', agent.control_socket]
    res = mu.fcache_json(['volume-set', 'vol1', '--write-policy',
                          'write_through'] + sock)
    assert res['dirty_blocks_written'] == 12
    assert not origin_mismatch(orc, origin, 'origin after fcache volume-set')
    res = mu.fcache_json(['volume-set', 'vol1', '--cache-size', '1M'] + sock)
    assert (res['previous_cache_size'], res['cache_size']) == (
        VOLUME_CACHE, MiB)
    assert agent.show('vol1')['cache_size'] == MiB
    rc, out, err = mu.fcache(['volume-set', 'vol1', '--cache-size', '6000'] +
                             sock)
    assert (rc, out) == (1, ''), err
    assert err.startswith('fcache: error: cache_size 6000 bytes is not a '
                          'multiple of the cache block (4096 bytes'), err
    assert 'give for instance 8192' in err, err
    rc, out, err = mu.fcache(['volume-set', 'vol1'] + sock)
    assert (rc, out) == (2, ''), err
    assert 'give a write policy or a cache size' in err
    assert agent.show('vol1')['write_policy'] == 'write_through'
    om.close(h)


# -- cache size -----------------------------------------------------------

# allocation = fixed: each volume reserves its cache_size of the host's
# 16 MiB, so the host's free cache is what the others leave.
FIXED = dict(HOLD_DIRTY, allocation='fixed')


def metric(agent, name, **labels):
    for fam in parser.text_string_to_metric_families(
            agent.client().metrics()):
        for sample in fam.samples:
            if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    raise AssertionError('no sample %s %r' % (name, labels))


def check_accounting(agent, size, reserved, volume_id='vol1'):
    """Every figure an operator reads agrees on the volume's cache size."""
    show = agent.show(volume_id)
    assert show['cache_size'] == size
    assert show['quota_blocks'] == size // BS
    assert show['cached_blocks'] <= size // BS, show
    assert state_file(agent, volume_id)['cache_size'] == size
    status = agent.status()
    assert status['reserved_bytes'] == reserved
    assert {v['volume_id']: v['cache_size'] for v in status['volumes']}[
        volume_id] == size
    assert metric(agent, 'fcache_volume_cache_size_bytes',
                  volume=volume_id) == size
    assert metric(agent, 'fcache_host_cache_reserved_bytes') == reserved
    return show


def resize(agent, size, volume_id='vol1'):
    return agent.client(timeout=120).set_volume(volume_id, cache_size=size)


def test_grow_under_writes(make_agent, make_origin):
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**FIXED).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=4 * MiB,
                              write_policy='write_back')
    orc = om.Oracle(origin.content)
    # The guest writes the whole volume, four times the cache.
    write_blocks(h, orc, 0, VOLUME_SIZE // BS, 0x21)
    assert agent.show('vol1')['cached_blocks'] == 4 * MiB // BS
    small = check_accounting(agent, 4 * MiB, 4 * MiB)
    writer = Writer(h, orc, seed=11)
    harness.wait_for(lambda: writer.ops() > 300, 60,
                     'the guest to write under write_back')

    res = resize(agent, 12 * MiB)
    assert (res['previous_cache_size'], res['cache_size']) == (4 * MiB,
                                                               12 * MiB)
    assert res['blocks_evicted'] == 0
    assert res['write_policy'] == 'write_back'
    # The block map's buckets grew with the quota (three times as many).
    assert agent.show('vol1')['memory_bytes'] >= \
        small['memory_bytes'] + 2 * (4 * MiB // BS) * 4
    done = writer.ops()
    harness.wait_for(lambda: writer.ops() > done + 300, 60,
                     'the guest to write with the larger cache')
    writer.stop()
    # The guest fills what it was given.
    write_blocks(h, orc, 0, VOLUME_SIZE // BS, 0x22)
    show = check_accounting(agent, 12 * MiB, 12 * MiB)
    assert show['cached_blocks'] > 4 * MiB // BS, show
    assert show['dirty_blocks'] > 4 * MiB // BS, show
    assert not om.verify_all(h, orc, 'read back after the grow')
    om.close(h)
    assert 'volume vol1: cache size 4194304 -> 12582912 bytes' in agent.log()
    # Its dirty blocks, more than the old size held, survive a crash.
    agent.kill()
    agent.start()
    check_accounting(agent, 12 * MiB, 12 * MiB)
    agent.client().claim_volume('vol1')
    agent.detach('vol1')
    assert not origin_mismatch(orc, origin, 'origin after the detach')


@pytest.mark.parametrize('policy', ['write_back', 'write_through'])
def test_shrink_under_writes(make_agent, make_origin, policy):
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**FIXED).start()
    attached, h = attach_and_connect(agent, 'vol1', origin,
                                     cache_size=12 * MiB,
                                     write_policy=policy)
    orc = om.Oracle(origin.content)
    # 3000 of the cache's 3072 blocks, dirty under write_back (nothing
    # writes them back until the shrink: HOLD_DIRTY).
    write_blocks(h, orc, 0, 3000, 0x31)
    before = check_accounting(agent, 12 * MiB, 12 * MiB)
    assert before['cached_blocks'] == 3000
    assert before['dirty_blocks'] == (3000 if policy == 'write_back' else 0)
    used_before = agent.status()['used_bytes']
    writer = Writer(h, orc, seed=13)
    harness.wait_for(lambda: writer.ops() > 300, 60,
                     'the guest to write under ' + policy)

    res = resize(agent, 2 * MiB)
    assert (res['previous_cache_size'], res['cache_size']) == (12 * MiB,
                                                               2 * MiB)
    # (The guest's trims and zeroes drop some blocks themselves, and its
    # misses replace the volume's own.)
    assert res['blocks_evicted'] > 1000, res
    if policy == 'write_back':
        # Dirty blocks had to reach the origin to leave.
        assert res['dirty_blocks_written'] > 0, res
    else:
        assert res['dirty_blocks_written'] == 0, res
    check_accounting(agent, 2 * MiB, 2 * MiB)
    assert agent.status()['used_bytes'] <= used_before - 2000 * BS
    done = writer.ops()
    harness.wait_for(lambda: writer.ops() > done + 300, 60,
                     'the guest to write with the smaller cache')
    writer.stop()
    show = check_accounting(agent, 2 * MiB, 2 * MiB)
    assert show['write_policy'] == policy
    assert not om.verify_all(h, orc, 'read back after the shrink')
    om.close(h)
    # The space given back is the host's again: another volume takes it.
    other = make_origin(VOLUME_SIZE, name='other')
    agent.attach('vol2', other.uri, cache_size=14 * MiB,
                 write_policy='write_through')
    assert agent.status()['reserved_bytes'] == 16 * MiB
    agent.detach('vol2')
    # A crash after the shrink: the state file's size takes every block
    # the volume kept, dirty ones included.
    agent.kill()
    agent.start()
    check_accounting(agent, 2 * MiB, 2 * MiB)
    h = om.connect(attached['export_uri'])
    assert not om.verify_all(h, orc, 'read back after the crash')
    om.close(h)
    agent.client().claim_volume('vol1')
    agent.detach('vol1')
    assert not origin_mismatch(orc, origin, 'origin after the detach')


def test_failed_shrink_keeps_the_size(make_agent, make_origin, workdir):
    origin, flag = failing_origin(make_origin, workdir)
    agent = make_agent(**FIXED).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 0, 1500, 0x41)
    assert agent.show('vol1')['dirty_blocks'] == 1500

    open(flag, 'w').close()
    exc = set_error(agent, cache_size=MiB)
    assert exc.errno == errno.EIO, exc
    assert 'it keeps 8388608 bytes and loses nothing' in str(exc), exc
    show = check_accounting(agent, VOLUME_CACHE, VOLUME_CACHE)
    assert show['dirty_blocks'] == 1500
    assert not om.verify_all(h, orc, 'read back after the failure')

    os.unlink(flag)
    res = resize(agent, MiB)
    assert res['dirty_blocks_written'] >= 1500 - 256, res
    check_accounting(agent, MiB, MiB)
    assert not om.verify_all(h, orc, 'read back after the shrink')
    om.close(h)
    agent.detach('vol1')
    assert not origin_mismatch(orc, origin, 'origin once it healed')


def test_cache_size_refusals(make_agent, make_origin):
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**FIXED).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=VOLUME_CACHE,
                              write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 0, 64, 0x51)
    other = make_origin(VOLUME_SIZE, name='other')
    agent.attach('vol2', other.uri, cache_size=6 * MiB,
                 write_policy='write_through')

    # 2 MiB of the host's 16 are free: 10 MiB is the most vol1 may have.
    exc = set_error(agent, cache_size=12 * MiB)
    assert exc.errno == errno.ENOSPC, exc
    assert str(exc).startswith(
        'cache device full: volume vol1 would need 4194304 more bytes, '
        '2097152 of 16777216 bytes are not reserved by any volume'), exc
    assert 'give at most 10485760' in str(exc), exc
    exc = set_error(agent, cache_size=32 * MiB)
    assert exc.errno == errno.ENOSPC, exc
    assert 'larger than the whole cache device (16777216 bytes)' in \
        str(exc), exc
    exc = set_error(agent, cache_size=VOLUME_CACHE + 100)
    assert exc.errno == errno.EINVAL, exc
    assert 'not a multiple of the cache block' in str(exc), exc
    check_accounting(agent, VOLUME_CACHE, 14 * MiB)
    assert agent.show('vol1')['dirty_blocks'] == 64
    # What the message offers is taken.
    assert resize(agent, 10 * MiB)['cache_size'] == 10 * MiB
    check_accounting(agent, 10 * MiB, 16 * MiB)

    # Dirty blocks recovered after a crash are not the shrink's to send.
    om.close(h)
    agent.kill()
    agent.start()
    assert agent.show('vol1')['writeback'] == 'held'
    exc = set_error(agent, cache_size=BS * 16)
    assert exc.errno == errno.EBUSY, exc
    assert 'volume-claim' in str(exc), exc
    check_accounting(agent, 10 * MiB, 16 * MiB)
    agent.client().claim_volume('vol1')
    assert resize(agent, BS * 16)['cache_size'] == BS * 16
    check_accounting(agent, BS * 16, BS * 16 + 6 * MiB)
    agent.detach('vol1')
    assert not origin_mismatch(orc, origin, 'origin after the detach')


def test_resize_with_rwss_allocation(make_agent, make_origin):
    """allocation = rwss: the size bounds the share, nothing is reserved."""
    origin = make_origin(VOLUME_SIZE)
    agent = make_agent(**HOLD_DIRTY).start()
    _, h = attach_and_connect(agent, 'vol1', origin, cache_size=12 * MiB,
                              write_policy='write_back')
    orc = om.Oracle(origin.content)
    write_blocks(h, orc, 0, 2500, 0x61)
    writer = Writer(h, orc, seed=17)
    harness.wait_for(lambda: writer.ops() > 300, 60,
                     'the guest to write under write_back')
    res = resize(agent, 2 * MiB)
    assert res['blocks_evicted'] > 1000, res
    alloc = check_accounting(agent, 2 * MiB, 0)['allocation']
    assert alloc['limit_bytes'] == 2 * MiB
    assert alloc['share_bytes'] <= 2 * MiB
    assert alloc['used_bytes'] <= 2 * MiB
    res = resize(agent, 8 * MiB)
    assert res['previous_cache_size'] == 2 * MiB
    alloc = check_accounting(agent, 8 * MiB, 0)['allocation']
    assert alloc['limit_bytes'] == 8 * MiB
    done = writer.ops()
    harness.wait_for(lambda: writer.ops() > done + 300, 60,
                     'the guest to write after the resizes')
    writer.stop()
    assert not om.verify_all(h, orc, 'read back after the resizes')
    om.close(h)
    agent.detach('vol1')
    assert not origin_mismatch(orc, origin, 'origin after the detach')
