# SPDX-License-Identifier: Apache-2.0
"""Finishing a migration on the source: the control plane, and retries.

``migration-finish`` makes the source forget every block it held for the
volume (doc/reference/migration.rst, "What bounds a migration's memory"): a
write per run of adjacent blocks, about a minute for a 1 TiB cache.  It does
that without the agent's host lock, which every control request takes,
and lets requests waiting for the volume's lock in between batches, so
the agent keeps answering meanwhile.  A client that retries a finish (a
timeout on its side, or an operator and Nova at once) sends a second one
while the first runs: that one waits for the first and answers the same.
It used to find the volume gone and crash the agent (a NULL volume in
``out_forget_all``).  And an attach of the volume meanwhile (a new user of
it on this host) is refused with EBUSY until the volume is gone, rather
than handed the volume the finish is about to detach.

Each test migrates a full cache with firepan: 1 GiB (262144 blocks) for
the first, whose forget must last long enough to be asked about.
"""

import threading

import pytest

from nova_ext import exception
from nova_ext import migration

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

BS = mu.BS
MiB = mu.MiB


def migrated(make_agent, make_origin, cache, suffix=''):
    """A full source cache moved to the destination, not yet finished."""
    src = make_agent(name='src' + suffix, cache_size=cache + 64 * MiB).start()
    dst = make_agent(name='dst' + suffix, cache_size=cache + 64 * MiB).start()
    origin = make_origin(cache, seed=21)
    res = src.attach('vol1', origin.uri, cache_size=cache,
                     write_policy='write_through')
    orc = om.Oracle(origin.content)
    # A miss may be served without being cached: once the volume is at its
    # size, eviction looks at the 128 least recently used blocks only, and
    # those may all be still installing (doc/reference/ucache.rst), and
    # on a loaded machine installs lag further behind.  A pass more reads
    # what the last left out; nearly all of the cache is enough.
    for _ in range(3):
        h = om.connect(res['export_uri'], name='fill')
        data, errors = om.read_range(h, 0, cache, chunk=MiB, depth=16,
                                     timeout=240)
        om.close(h)
        assert not errors and not mu.check_range(orc, 0, data, 'fill')
        full = src.status()['used_bytes']
        if full > 0.9 * cache:
            break
    assert full > 0.9 * cache, src.status()
    s, d = src.client(), dst.client()
    p = migration.prepare(s, d, 'vol1', 'firepan')
    mid = p['migration_id']
    migration.start(s, d, mid)
    migration.switchover(s, d, mid)
    mu.wait_state(dst, mid, ('completed',), timeout=120)
    return src, dst, mid, full


def finisher(src, mid, results):
    def finish():
        try:
            results.append(src.client(timeout=120).call(
                'migration-finish', migration_id=mid, timeout_s=60))
        except Exception as exc:   # reported by the test's assertions
            results.append(exc)
    return threading.Thread(target=finish)


@pytest.mark.timeout(600)
def test_control_answers_while_the_source_forgets(make_agent, make_origin):
    # The forget lasts some 70 ms here, and each agent-status takes a few:
    # the poll lands inside it more often than not, but not always.  A
    # finish holding the control plane never lets one land there, so up to
    # three migrations are tried before that is the verdict.
    tries = []
    for attempt in range(3):
        src, dst, mid, full = migrated(make_agent, make_origin, 1024 * MiB,
                                       suffix=str(attempt))
        results, seen = [], []
        t = finisher(src, mid, results)
        poll = src.client()
        t.start()
        while t.is_alive():
            seen.append(poll.call('agent-status')['used_bytes'])
        t.join()
        assert len(results) == 1 and isinstance(results[0], dict), results
        assert results[0]['state'] == 'completed', results
        assert src.status()['used_bytes'] == 0
        assert mu.volume_gone(src, 'vol1')
        between = [u for u in seen if 0 < u < full]
        tries.append((len(seen), len(between)))
        if between:
            break
    print('agent-status answers during finish (all, mid-forget): %s' % tries)
    assert tries[-1][1], (
        'no agent-status answered while the source forgot its %d blocks, '
        'in %d migrations: migration-finish held the control plane '
        '(answers: %s)' % (full // BS, len(tries), tries))


@pytest.mark.timeout(300)
def test_finish_sent_twice_at_once(make_agent, make_origin):
    src, dst, mid, _ = migrated(make_agent, make_origin, 128 * MiB)
    results = []
    threads = [finisher(src, mid, results) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    src.assert_alive()
    assert len(results) == 2 and all(isinstance(r, dict) for r in results), \
        results
    assert [r['state'] for r in results] == ['completed'] * 2, results
    # And once more after both: the same answer, nothing left to release.
    again = src.client().call('migration-finish', migration_id=mid,
                              timeout_s=5)
    assert again['state'] == 'completed', again
    assert src.status()['used_bytes'] == 0
    assert mu.volume_gone(src, 'vol1')


@pytest.mark.timeout(300)
def test_attach_during_finish_is_never_undone(make_agent, make_origin):
    src, dst, mid, full = migrated(make_agent, make_origin, 1024 * MiB)
    vol = src.show('vol1')
    results, outcomes = [], []
    t = finisher(src, mid, results)
    poll = src.client()
    t.start()
    # From the moment the forget has begun (before it, the volume is the
    # migration's, frozen, and an attach with the same parameters is
    # answered with it as any repeated attach is).
    while t.is_alive() and poll.call('agent-status')['used_bytes'] == full:
        pass
    while t.is_alive():
        try:
            poll.call('volume-attach', volume_id='vol1',
                      origin=vol['origin'], cache_size=vol['cache_size'],
                      write_policy=vol['write_policy'])
            outcomes.append('attached')
            break
        except exception.AgentError as exc:
            outcomes.append(exc.error)
    t.join()
    assert len(results) == 1 and isinstance(results[0], dict), results
    refused = [o for o in outcomes if o != 'attached']
    print('attach answers during the forget: %d refused, then %s' % (
        len(refused), outcomes[-1] if outcomes else None))
    assert all('being released' in o for o in refused), refused[:3]
    if outcomes and outcomes[-1] == 'attached':
        # Acknowledged: a new volume, not the one the finish detached.
        st = src.show('vol1')
        assert st['state'] == 'attached', st
        assert st['cached_blocks'] == 0, st
