# SPDX-License-Identifier: Apache-2.0
"""The RWS window chosen online at the knee (doc/reference/allocation.rst,
"Choosing the window"), in the real agent.

With ``allocation_window = auto`` a volume's window is chosen at each of
its windows' close at the knee of its hit ratio against the window, which
the agent measures from the reuse times of the VM's accesses.  A VM that
reads the same blocks over and over, each again after about 6 s, has a
hit-ratio curve that is 0 up to 4 s and flat from 8 s: the knee is 8 s
(the candidate windows are powers of two).  The window must settle there
and stay, within the bounds; an upper bound below the knee keeps it at the
lower bound (no knee within the bounds); a volume attached with its own
``rws_window_s`` keeps it.  The test waits on the agent's own counts
(windows closed), not on the clock; every read is checked against the
oracle.
"""

import json
import time

import pytest

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om
from nova_ext import migration

MiB = 1 << 20
BS = 4096
PERIOD_S = 6.0          # the reuse time of every block read
BLOCKS = 96             # read once per period, evenly spread
PASSES = 16             # the most the window may take to settle


def attach(agent, volume_id, origin, **args):
    res = agent.client().call('volume-attach', volume_id=volume_id,
                              origin=origin.uri, cache_size=4 * MiB, **args)
    return om.connect(res['export_uri'], name=volume_id)


def one_pass(handles, t0, k):
    """Pass k: every block of every handle once.

    Each block is read at the same moment of the pass as in the pass
    before, so each is read again PERIOD_S later.
    """
    for i in range(BLOCKS):
        due = t0 + k * PERIOD_S + i * PERIOD_S / BLOCKS
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        for h, orc in handles:
            off = i * 7 * BS            # blocks apart, not one range
            m = orc.check(off, h.pread(BS, off))
            assert m is None, m


def run_until_settled(agent, handles, volume_id, want):
    """Passes until volume_id's window is `want` at two closes in a row.

    Returns the volume's allocation at the end.
    """
    t0 = time.monotonic()
    settled_at = None
    for k in range(PASSES):
        one_pass(handles, t0, k)
        a = agent.show(volume_id)['allocation']
        if a['window_at_knee'] and a['window_s'] == want:
            if settled_at is None:
                settled_at = a['windows']
            elif a['windows'] > settled_at:
                return a
        else:
            settled_at = None
    return agent.show(volume_id)['allocation']


def test_window_settles_at_the_knee(make_agent, make_origin):
    agent = make_agent(cache_size='16M', allocation_window='auto',
                       allocation_window_min=1,
                       allocation_window_max=16).start()
    summary = agent.client().allocation()
    assert (summary['window_auto'], summary['window_min_s'],
            summary['window_max_s'], summary['window_s']) == (True, 1, 16, 1)
    origin, fixed_origin = make_origin(8 * MiB), make_origin(8 * MiB)
    h = attach(agent, 'auto', origin)
    hf = attach(agent, 'fixed', fixed_origin, rws_window_s=3)
    a = agent.show('auto')['allocation']
    # Until a knee is known: the lower bound.
    assert (a['window_auto'], a['window_at_knee'], a['window_s']) == (
        True, False, 1), a
    assert 0 < a['tracker']['knee_memory_bytes'] < 64 * 1024, a

    a = run_until_settled(
        agent, [(h, om.Oracle(origin.content)),
                (hf, om.Oracle(fixed_origin.content))], 'auto', 8)
    assert (a['window_auto'], a['window_at_knee'], a['window_s']) == (
        True, True, 8), a
    f = agent.show('fixed')['allocation']
    assert (f['window_auto'], f['window_at_knee'], f['window_s']) == (
        False, False, 3), f
    assert f['tracker']['knee_memory_bytes'] == 0, f
    om.close(h)
    om.close(hf)

    # The chosen window is kept across a restart (the reuse times are not).
    agent.stop()
    agent.start()
    a = agent.show('auto')['allocation']
    assert (a['window_at_knee'], a['window_s']) == (True, 8), a

    # And it goes with the volume when it live-migrates, with the demand
    # history behind its prediction: the destination neither starts again
    # from the lower bound nor without a prediction.
    assert a['rwss_predicted_bytes'] is not None, a
    dst = make_agent(name='dst', cache_size='16M',
                     allocation_window='auto', allocation_window_min=1,
                     allocation_window_max=16).start()
    res = migration.migrate(agent.client(), dst.client(), 'auto', 'firepan')
    assert res['state'] == 'completed', res
    d = dst.show('auto')['allocation']
    assert (d['window_auto'], d['window_at_knee'], d['window_s']) == (
        True, True, 8), d
    assert d['rwss_predicted_bytes'] is not None, d
    h = om.connect(dst.show('auto')['export_uri'], name='auto')
    orc = om.Oracle(origin.content)
    for i in range(BLOCKS):
        m = orc.check(i * 7 * BS, h.pread(BS, i * 7 * BS))
        assert m is None, m
    om.close(h)


def test_window_stays_within_its_bounds(make_agent, make_origin):
    # The knee (8 s) is above the upper bound: within 1..4 s the curve is
    # flat (no block is read again within 4 s), which has no knee, and the
    # smallest window is kept.
    agent = make_agent(cache_size='16M', allocation_window='auto',
                       allocation_window_min=1,
                       allocation_window_max=4).start()
    origin = make_origin(8 * MiB)
    h = attach(agent, 'auto', origin)
    t0 = time.monotonic()
    for k in range(3):
        one_pass([(h, om.Oracle(origin.content))], t0, k)
    a = agent.show('auto')['allocation']
    assert a['windows'] >= 8, a
    assert (a['window_auto'], a['window_at_knee'], a['window_s']) == (
        True, True, 1), a
    om.close(h)


@pytest.mark.scripted_peer
def test_a_sources_account_is_checked(make_agent, make_origin):
    """A source's "allocation" is taken value by value, as a file's is.

    A scripted source (plaintext, the frames an authenticated peer may
    send) offers an account with a window beyond the bounds and history
    values no cache could hold, a string among them: the window is held
    to the upper bound, the damaged values are dropped, and the prediction
    comes from the two real ones alone.
    """
    dst = make_agent(name='dst', cache_size='16M',
                     allocation_window='auto', allocation_window_min=1,
                     allocation_window_max=16).start()
    origin = make_origin(8 * MiB)
    inc = mu.incoming_only(dst, 'vol1', origin.uri, 4 * MiB,
                           'write_through', strategy='firepan')
    fresh = dst.show('vol1')['allocation']
    assert fresh['rwss_predicted_bytes'] is None, fresh
    msg = {'migration_id': inc['migration_id'], 'volume_id': 'vol1',
           'token': inc['token'], 'block_size': BS, 'strategy': 'firepan',
           'allocation': {'history': [1e308, -5.0, 'x', 100.0, 100.0],
                          'share_blocks': 10 ** 15, 'error_sum': -1.0,
                          'error_n': 2 ** 40, 'window_s': 10 ** 12}}
    s = mu.connect_listen(inc['listen'])
    try:
        s.sendall(mu.frame(mu.T_HELLO, json.dumps(msg).encode()))
        first = mu.recv_frame(s)
        assert first is not None and first[0] == mu.T_WELCOME, first
        a = dst.show('vol1')['allocation']
    finally:
        s.close()
    assert (a['window_auto'], a['window_at_knee'], a['window_s']) == (
        True, True, 16), a
    assert a['rwss_predicted_bytes'] == 100 * BS, a
    assert a['prediction_error'] is None, a
    assert a['share_bytes'] <= a['limit_bytes'], a
