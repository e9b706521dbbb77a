# SPDX-License-Identifier: Apache-2.0
"""Live storage migration between media (doc/reference/storage-migration.rst).

An attached ucache volume's origin moves from A to B (two nbdkit servers)
while an oracle-checked workload runs on the same export, with each
scheme: dbt, mirror, lr, slr, aio, dbt_capped.  After "done" the volume's
origin is B, B's file equals the oracle and A is not used any more (its
server is stopped and the volume still serves).  B failing mid-copy,
dbt_capped not converging, an abort and a kill -9 of the agent mid-move
(lr, slr, aio: the recovery log is replayed to A; dbt, mirror: A never
lacked a write) all leave the VM on a consistent A.  Towards a B slower
than the VM dirties, dbt pauses the VM for seconds and ends on B, where
dbt_capped gives up; AIO reads the copied region from whichever side
nova_ext/movecost.py takes for the faster, seen in the origins' own
nbdkit logs.  Under 16 requests in flight LR's copier reads A once per
chunk and writes the chunk's runs to B at once (issue 35).  Every read
is checked against the oracle: the last acknowledged write.
"""

import os
import re
import signal
import threading
import time

import pytest

from nova_ext import exception
from nova_ext import movecost

from fcache_testkit import harness
from fcache_testkit import oracle as om

MiB = 1 << 20
SIZE = 8 * MiB
CACHE = 2 * MiB
SCHEMES = ['dbt', 'mirror', 'lr', 'slr', 'aio', 'dbt_capped']
TERMINAL = ('done', 'failed', 'aborted')


def call(agent, op, **args):
    return agent.client().call(op, **args)


def setup(make_agent, make_origin, b_filters=(), b_args=(),
          policy='write_through', a_filters=(), a_args=(), **agent_cfg):
    a = make_origin(SIZE, name='A', filters=a_filters, filter_args=a_args)
    b = make_origin(SIZE, name='B', filled_fraction=0.3, filters=b_filters,
                    filter_args=b_args)
    agent = make_agent(cache_size='8M', writeback_interval_ms=50,
                       **agent_cfg).start()
    res = call(agent, 'volume-attach', volume_id='vol1', origin=a.uri,
               cache_size=CACHE, write_policy=policy)
    h = om.connect(res['export_uri'], name='vol1')
    orc = om.Oracle(a.content)
    return agent, a, b, h, orc


def workload(h, orc, seed, hot_fraction=1.0):
    # Writes spread over the whole volume (or its hot part), so they land
    # in both the copied and the not yet copied region.
    return om.Workload(h, orc, seed=seed, depth=8, hot_fraction=hot_fraction,
                       hot_share=1.0, max_length=32768)


def run_until(agent, wl, pred=lambda st: st['state'] in TERMINAL, timeout=30,
              on_status=None):
    deadline = time.monotonic() + timeout
    while True:
        wl.run(duration=0.2)
        st = call(agent, 'volume-move-status', volume_id='vol1')
        if on_status:
            on_status(st)
        if pred(st):
            return st
        assert time.monotonic() < deadline, st


def origin_file_is_oracle(origin, orc):
    mism = om.compare(orc, origin.read_file(), 'origin %s' % origin.path)
    assert not mism, mism


@pytest.mark.parametrize('scheme', SCHEMES)
def test_move_done(make_agent, make_origin, scheme):
    agent, a, b, h, orc = setup(make_agent, make_origin)
    # DBT converges when the VM rewrites a working set smaller than
    # converge_bytes (4 MiB): its writes stay in a quarter of the volume.
    dbt = scheme in ('dbt', 'dbt_capped')
    wl = workload(h, orc, seed=1, hot_fraction=0.25 if dbt else 1.0)
    wl.run(nops=100)
    extra = {}
    if scheme == 'dbt_capped':
        # Small enough that the writes made during the first pass need a
        # merge round; the VM only reads after the first pass, so the
        # rounds converge.
        extra['converge_bytes'] = 65536
    r = call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme=scheme,
             rate_limit_mbps=6, **extra)
    assert r == {'volume_id': 'vol1', 'scheme': scheme, 'state': 'copying'}
    seen = set()

    def first_pass_done(st):
        return st['state'] in TERMINAL or (dbt and
                                           st['bytes_copied'] == SIZE)
    st = run_until(agent, wl, first_pass_done,
                   on_status=lambda s: seen.add(s['state']))
    if st['state'] not in TERMINAL:
        reads = om.Workload(h, orc, seed=11, depth=8, mix=[('read', 1)])
        st = run_until(agent, reads)
        reads.assert_clean()
        assert st['rounds'] >= (1 if scheme == 'dbt_capped' else 0), st
    wl.assert_clean()
    assert st['state'] == 'done', st['error']
    assert 'copying' in seen
    assert st['from'] == a.uri and st['to'] == b.uri
    assert st['bytes_copied'] == st['bytes_total'] == SIZE
    assert st['error'] is None
    assert 0 <= st['downtime_ms'] < 5000
    if scheme == 'dbt_capped':
        # The held last round stops at the default downtime_ms (200) and
        # tries again later: whatever the estimate, no pause runs over.
        assert st['downtime_ms'] <= 400, st
        assert st['held_rounds_cut'] >= 0 and st['pause_estimate_ms'] >= 0
    io = st['io']
    assert io['vm_write_bytes'] > 0, st
    if scheme == 'lr':
        # Every write went to B alone: A was only read.
        assert io['a_write_bytes'] == 0, st
    if scheme in ('mirror', 'aio'):
        assert io['redundant_write_bytes'] > 0, st
    assert st['aio_delay_ms'] >= 0 and (scheme == 'aio' or
                                        st['aio_delay_ms'] == 0), st
    show = call(agent, 'volume-show', volume_id='vol1')
    assert show['origin'] == b.uri
    assert show['move']['state'] == 'done'
    print('%s: downtime %.3f ms, %.1f s, rounds %d, io %s' % (
        scheme, st['downtime_ms'], st['elapsed_s'], st['rounds'], io))
    # A is not used any more.
    a.server.stop()
    wl.run(nops=150)
    wl.assert_clean()
    assert not om.verify_all(h, orc)
    if scheme == 'lr':
        # B is the origin in the volume's state file too.
        om.close(h)
        agent.restart()
        show = call(agent, 'volume-show', volume_id='vol1')
        assert show['origin'] == b.uri and show['state'] == 'attached'
        h = om.connect(show['export_uri'], name='vol1')
        assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(b, orc)


# An HDD-like A (every request 5 ms): under AIO, B is the faster side and
# serves the VM's reads of the copied region.
SLOW_A = {'a_filters': ['delay'],
          'a_args': ['delay-read=5ms', 'delay-write=5ms']}


@pytest.mark.parametrize('scheme', ['dbt', 'mirror', 'lr', 'slr', 'aio',
                                    'aio_a_slow'])
def test_b_fails_mid_copy(make_agent, make_origin, workdir, scheme):
    flag = os.path.join(workdir, 'b-fails')
    a_slow = scheme == 'aio_a_slow'
    scheme = 'aio' if a_slow else scheme
    agent, a, b, h, orc = setup(
        make_agent, make_origin, b_filters=['error'],
        b_args=['error-rate=100%', 'error-file=' + flag], policy='write_back',
        **(SLOW_A if a_slow else {}))
    wl = workload(h, orc, seed=2)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme=scheme,
         rate_limit_mbps=4)
    st = run_until(agent, wl, lambda st: st['bytes_copied'] >= 2 * MiB)
    if a_slow:
        # B was serving reads when it was lost.
        assert st['io']['b_read_bytes'] > 0, st
    open(flag, 'w').close()
    st = run_until(agent, wl)
    wl.assert_clean()
    assert st['state'] == 'failed', st
    assert 'destination failed' in st['error'], st
    assert call(agent, 'volume-show', volume_id='vol1')['origin'] == a.uri
    wl.run(nops=100)
    wl.assert_clean()
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(a, orc)


def test_dbt_capped_does_not_converge(make_agent, make_origin):
    agent, a, b, h, orc = setup(make_agent, make_origin)
    wl = om.Workload(h, orc, seed=3, depth=16, hot_fraction=1.0,
                     mix=[('write', 8), ('read', 2)])
    call(agent, 'volume-move', volume_id='vol1', to=b.uri,
         scheme='dbt_capped', max_rounds=2, converge_bytes=4096,
         rate_limit_mbps=8)
    st = run_until(agent, wl)
    wl.assert_clean()
    assert st['state'] == 'failed', st
    assert 'did not converge' in st['error'] and st['rounds'] == 2, st
    assert call(agent, 'volume-show', volume_id='vol1')['origin'] == a.uri
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(a, orc)


@pytest.mark.parametrize('scheme', ['dbt', 'mirror', 'lr', 'slr', 'aio',
                                    'aio_a_slow'])
def test_agent_killed_mid_move(make_agent, make_origin, scheme):
    a_slow = scheme == 'aio_a_slow'
    scheme = 'aio' if a_slow else scheme
    logged = scheme in ('lr', 'slr', 'aio')
    agent, a, b, h, orc = setup(make_agent, make_origin,
                                **(SLOW_A if a_slow else {}))
    # Mostly reads: LR skips what the VM wrote, and a VM writing the
    # whole volume would end the copy before the kill.  With A slow, the
    # hot tenth at the start, copied first: AIO reads it from B.
    wl = om.Workload(h, orc, seed=4, depth=8, hot_fraction=0.1,
                     hot_start=0 if a_slow else None,
                     mix=[('write', 3), ('read', 7)], max_length=32768)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme=scheme,
         rate_limit_mbps=1)
    run_until(agent, wl, lambda st: st['bytes_copied'] >= MiB)
    wl.run(nops=50)
    wl.assert_clean()
    st = call(agent, 'volume-move-status', volume_id='vol1')
    assert st['state'] == 'copying', st
    assert st['io']['b_write_bytes'] > 0
    if a_slow:
        assert st['io']['b_read_bytes'] > 0, st
    om.close(h)
    agent.kill()
    agent.start()
    show = call(agent, 'volume-show', volume_id='vol1')
    assert show['origin'] == a.uri
    if logged:
        assert show['move']['state'] == 'failed'
        assert 'replayed to the source' in show['move']['error'], show
        assert show['move']['scheme'] == scheme
        assert show['move']['from'] == a.uri and show['move']['to'] == b.uri
    else:
        # No log: A had every acknowledged write all along.
        assert not show.get('move'), show
    h = om.connect(show['export_uri'], name='vol1')
    assert not om.verify_all(h, orc)
    wl = workload(h, orc, seed=5)
    wl.run(nops=100)
    wl.assert_clean()
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(a, orc)


def test_abort_and_bad_arguments(make_agent, make_origin, workdir):
    agent, a, b, h, orc = setup(make_agent, make_origin)
    small = make_origin(SIZE // 2, name='small')
    other = make_origin(SIZE, name='other')
    call(agent, 'volume-attach', volume_id='vol2', origin=other.uri,
         cache_size=CACHE)

    def refused(match, **args):
        with pytest.raises(exception.AgentError) as e:
            agent.client(unchecked=True).call('volume-move', **args)
        assert match in harness.control_error_text(e.value), e.value

    refused("missing argument 'to'", volume_id='vol1', scheme='lr')
    refused("argument 'scheme' of 'volume-move' must be a string",
            volume_id='vol1', to=b.uri, scheme=3)
    refused("is not one of dbt", volume_id='vol1', to=b.uri, scheme='fast')
    refused("not attached", volume_id='nope', to=b.uri, scheme='lr')
    refused("less than the volume", volume_id='vol1', to=small.uri,
            scheme='lr')
    refused("already", volume_id='vol1', to=a.uri, scheme='lr')
    refused("is the origin of volume vol2", volume_id='vol1', to=other.uri,
            scheme='lr')
    refused("'max_rounds' of 'volume-move' must be an integer",
            volume_id='vol1', to=b.uri,
            scheme='dbt', max_rounds=0)
    refused("'downtime_ms' of 'volume-move' must be an integer from 1 to "
            "60000",
            volume_id='vol1', to=b.uri, scheme='dbt', downtime_ms=60001)
    refused("'rate_limit_mbps' of 'volume-move' must be an integer",
            volume_id='vol1',
            to=b.uri, scheme='dbt', rate_limit_mbps='x')
    # dbt pauses for as long as its last round takes: a cap it would not
    # keep is refused, not ignored.
    for cap in ({'downtime_ms': 200}, {'converge_bytes': 65536}):
        refused("are dbt_capped's", volume_id='vol1', to=b.uri,
                scheme='dbt', **cap)
    # The same origin policy as attach: a relative path is refused.
    refused('', volume_id='vol1', to='relative/path', scheme='lr')
    with pytest.raises(exception.AgentError) as e:
        call(agent, 'volume-move-status', volume_id='vol1')
    assert 'has not moved' in harness.control_error_text(e.value)
    with pytest.raises(exception.AgentError) as e:
        call(agent, 'volume-move-abort', volume_id='vol1')
    assert 'no move' in harness.control_error_text(e.value)

    wl = workload(h, orc, seed=6)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme='lr',
         rate_limit_mbps=2)
    refused('already running', volume_id='vol1', to=b.uri, scheme='slr')
    run_until(agent, wl, lambda st: st['bytes_copied'] >= MiB)
    st = call(agent, 'volume-move-abort', volume_id='vol1')
    assert st['state'] == 'aborted', st
    assert call(agent, 'volume-show', volume_id='vol1')['origin'] == a.uri
    wl.run(nops=100)
    wl.assert_clean()
    assert not om.verify_all(h, orc)
    # The next move starts from where the last one left the volume, and
    # replaces its status.
    # Without a scheme: IO mirroring.
    r = call(agent, 'volume-move', volume_id='vol1', to=b.uri)
    assert r['scheme'] == 'mirror', r
    st = run_until(agent, wl)
    wl.assert_clean()
    assert st['state'] == 'done' and st['scheme'] == 'mirror', st
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(b, orc)


def test_b_killed_mid_copy(make_agent, make_origin):
    agent, a, b, h, orc = setup(make_agent, make_origin, policy='write_back')
    wl = workload(h, orc, seed=7)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme='lr',
         rate_limit_mbps=4)
    run_until(agent, wl, lambda st: st['bytes_copied'] >= 2 * MiB)
    b.server.proc.kill()
    t0 = time.monotonic()
    st = run_until(agent, wl, timeout=50)
    print('B killed: move %s after %.1f s: %s' % (st['state'],
                                                  time.monotonic() - t0,
                                                  st['error']))
    wl.assert_clean()
    assert st['state'] == 'failed', st
    assert call(agent, 'volume-show', volume_id='vol1')['origin'] == a.uri
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(a, orc)


def abort_with_target_stopped(agent, wl, pid, join_s=5):
    """Stop ``pid`` (the move target's server) and abort the move.

    The VM writes all along.  Control requests are answered meanwhile,
    the abort within a second, and the VM's requests waiting on the target
    end with it.  Returns the abort's answer.
    """
    os.kill(pid, signal.SIGSTOP)
    try:
        runner = threading.Thread(target=wl.run,
                                  kwargs={'nops': 50, 'timeout': 60})
        runner.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        call(agent, 'agent-status')
        st = call(agent, 'volume-move-status', volume_id='vol1')
        assert time.monotonic() - t0 < 1.0
        assert st['state'] == 'copying', st
        t0 = time.monotonic()
        st = call(agent, 'volume-move-abort', volume_id='vol1')
        took = time.monotonic() - t0
        runner.join(join_s)
        assert not runner.is_alive(), 'VM requests still waiting on B'
    finally:
        os.kill(pid, signal.SIGCONT)
    assert took < 1.0, took
    assert st['state'] == 'aborted', st
    return st


@pytest.mark.parametrize('scheme', SCHEMES)
def test_abort_with_target_stopped(make_agent, make_origin, scheme):
    """B stops answering (SIGSTOP) mid-copy with VM writes routed to it.

    The control socket keeps answering, move-abort answers within a
    second, the VM's writes waiting on B end with it (no error: the move
    falls back to A), and A holds every acknowledged write.
    """
    agent, a, b, h, orc = setup(make_agent, make_origin)
    wl = workload(h, orc, seed=3)
    wl.run(nops=50)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme=scheme,
         rate_limit_mbps=2)
    time.sleep(0.3)
    abort_with_target_stopped(agent, wl, b.server.proc.pid)
    wl.assert_clean()
    assert call(agent, 'volume-show', volume_id='vol1')['origin'] == a.uri
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(a, orc)


@pytest.mark.timeout(240)
@pytest.mark.parametrize('scheme', ['dbt', 'dbt_capped'])
def test_dbt_towards_a_destination_slower_than_the_vm_dirties(
        make_agent, make_origin, scheme):
    """The paper's DBT problem (§3.2, Table 3: 4 s of downtime SSD to HDD).

    B takes 2 MB/s (nbdkit's rate filter) and the VM rewrites a 2 MiB
    working set faster than that, so no merge round shrinks the dirty
    set.  dbt pauses the VM for the copy of all of it -- about a second,
    the guest's requests held -- and ends on B; dbt_capped holds it at
    most its 200 ms at a time, cutting its pauses short, and either gets
    there between them or gives up, the VM staying on A.  Both keep
    every acknowledged write.
    """
    agent, a, b, h, orc = setup(make_agent, make_origin, b_filters=['rate'],
                                b_args=['rate=16M'])
    wl = om.Workload(h, orc, seed=12, depth=16, hot_fraction=0.25,
                     hot_share=1.0, mix=[('write', 8), ('read', 2)],
                     max_length=32768)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme=scheme)
    st = run_until(agent, wl, timeout=180)
    wl.assert_clean()
    print('%s: %s after %d rounds (%d pauses cut), downtime %.0f ms, '
          '%.1f s: %s' % (scheme, st['state'], st['rounds'],
                          st['held_rounds_cut'], st['downtime_ms'],
                          st['elapsed_s'], st['error']))
    if scheme == 'dbt':
        assert st['state'] == 'done', st
        # Twice the 200 ms dbt_capped allows itself and more: the paper's
        # downtime towards a slower medium, now observable.
        assert st['downtime_ms'] > 400, st
        assert st['held_rounds_cut'] == 0, st
        where = b
    else:
        # Each pause cut at 200 ms (the copy of one run more): it ends on
        # B only if the rounds between its short pauses ever got the rest
        # under that, else it gives up on A.
        assert st['held_rounds_cut'] >= 1, st
        assert st['downtime_ms'] <= 400, st
        if st['state'] == 'done':
            where = b
        else:
            assert st['state'] == 'failed', st
            assert 'did not converge' in st['error'], st
            where = a
    assert call(agent, 'volume-show', volume_id='vol1')['origin'] == where.uri
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(where, orc)


READ_RE = re.compile(r' Read id=\d+ offset=0x([0-9a-f]+) count=0x([0-9a-f]+)')


def reads_below(origin, start, limit):
    """Bytes read of ``origin`` below ``limit`` since its log's ``start``.

    nbdkit's log filter's own record of what reached the server.
    """
    with open(origin.server.nbd_log, 'r', errors='replace') as f:
        f.seek(start)
        text = f.read()
    return sum(int(n, 16) for off, n in READ_RE.findall(text)
               if int(off, 16) < limit)


def log_end(origin):
    return os.path.getsize(origin.server.nbd_log)


@pytest.mark.parametrize('src,dst', [('hdd', 'ssd'), ('ssd', 'hdd')])
def test_aio_routes_as_the_model(make_agent, make_origin, workdir, src, dst):
    """AIO's reads of the copied region go where the cost model says.

    The HDD side answers every request 5 ms late (nbdkit's delay filter).
    While the copy runs, the VM writes and reads the whole volume (its
    duplicates show the agent which side writes faster); once half is
    copied, it reads only that half.  Those reads must reach the side
    nova_ext/movecost.py's ``routes('aio', ...)`` puts them on and
    never the other, by the two nbdkit servers' own logs (the copier reads
    A only above the cursor, B never).  Every read is checked against the
    oracle, and the move ends on B with every write.
    """
    fast = movecost.faster_side(src, dst)
    assert ('r', (fast,)) in [(kind, disks) for share, kind, disks in
                              movecost.routes('aio', src, dst, 0.5)]
    slow_args = ['delay-read=5ms', 'delay-write=5ms']
    a_log, b_log = (os.path.join(workdir, n) for n in ('A.reads', 'B.reads'))
    agent, a, b, h, orc = setup(
        make_agent, make_origin,
        a_filters=['log'] + (['delay'] if src == 'hdd' else []),
        a_args=['logfile=' + a_log] + (slow_args if src == 'hdd' else []),
        b_filters=['log'] + (['delay'] if dst == 'hdd' else []),
        b_args=['logfile=' + b_log] + (slow_args if dst == 'hdd' else []))
    a.server.nbd_log, b.server.nbd_log = a_log, b_log
    wl = workload(h, orc, seed=13)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme='aio',
         rate_limit_mbps=2)
    half = SIZE // 2
    run_until(agent, wl, lambda st: st['bytes_copied'] >= half)
    st0 = call(agent, 'volume-move-status', volume_id='vol1')
    a0, b0 = log_end(a), log_end(b)
    # Reads of the copied half only, more than the 2 MiB cache holds.
    reads = om.Workload(h, orc, seed=14, depth=8, mix=[('read', 1)],
                        region=(0, half), max_length=32768)
    reads.run(duration=1.0)
    reads.assert_clean()
    st1 = call(agent, 'volume-move-status', volume_id='vol1')
    assert st1['state'] == 'copying', st1
    on_a, on_b = reads_below(a, a0, half), reads_below(b, b0, SIZE)
    print('%s->%s: the copied half read %d bytes from A, %d from B; '
          'agent: b_read %d' % (src, dst, on_a, on_b,
                                st1['io']['b_read_bytes'] -
                                st0['io']['b_read_bytes']))
    if fast == 'b':
        assert on_b > 0 and on_a == 0, (on_a, on_b)
        assert st1['io']['b_read_bytes'] > st0['io']['b_read_bytes']
    else:
        assert on_a > 0 and on_b == 0, (on_a, on_b)
        assert st1['io']['b_read_bytes'] == st0['io']['b_read_bytes'] == 0
    st = run_until(agent, wl)
    wl.assert_clean()
    assert st['state'] == 'done', st
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(b, orc)


def test_mirror_write_costs_the_slower_side_not_both(make_agent, make_origin):
    """IO mirroring writes A and B at once (§2: "synchronized").

    Both servers take 50 ms a write (nbdkit's delay filter).  A write to
    the copied region, write-through, costs one of them -- a median under
    85 ms, where A then B cost 100 and more -- and both files have it when
    it is acknowledged.
    """
    slow = ['delay-write=50ms']
    agent, a, b, h, orc = setup(make_agent, make_origin, a_filters=['delay'],
                                a_args=slow, b_filters=['delay'], b_args=slow)
    wl = workload(h, orc, seed=15)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme='mirror',
         rate_limit_mbps=2)
    run_until(agent, wl, lambda st: st['bytes_copied'] >= SIZE // 2)
    took = []
    for i in range(10):
        data = bytes([0x40 + i]) * 4096
        t0 = time.monotonic()
        h.pwrite(data, i * 8192)
        took.append(time.monotonic() - t0)
        orc.write(i * 8192, data)
        for origin in (a, b):
            with open(origin.path, 'rb') as f:
                f.seek(i * 8192)
                assert f.read(4096) == data, origin.path
    st = call(agent, 'volume-move-status', volume_id='vol1')
    assert st['state'] == 'copying', st
    print('mirror writes: %s ms' % ', '.join('%.0f' % (t * 1000)
                                             for t in took))
    assert min(took) >= 0.05, took
    # The median: one write a busy machine delays says nothing of both.
    assert sorted(took)[len(took) // 2] < 0.085, took
    st = run_until(agent, wl)
    wl.assert_clean()
    assert st['state'] == 'done', st
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(b, orc)


@pytest.mark.timeout(240)
def test_dbt_pause_can_be_aborted(make_agent, make_origin):
    """dbt's pause runs however long the copy takes, but not past an abort.

    B takes 1 MB/s; once dbt holds the VM's requests for its last round
    (state ``switching``) the abort answers within a second or two, the
    held requests resume on A and A has every acknowledged write.
    """
    agent, a, b, h, orc = setup(make_agent, make_origin, b_filters=['rate'],
                                b_args=['rate=8M'])
    wl = om.Workload(h, orc, seed=16, depth=16, hot_fraction=0.25,
                     hot_share=1.0, mix=[('write', 8), ('read', 2)],
                     max_length=32768)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme='dbt')
    deadline = time.monotonic() + 120
    runner = None
    while True:
        if runner is None or not runner.is_alive():
            runner = threading.Thread(target=wl.run,
                                      kwargs={'duration': 0.5,
                                              'timeout': 60})
            runner.start()
        st = call(agent, 'volume-move-status', volume_id='vol1')
        assert st['state'] in ('copying', 'switching'), st
        if st['state'] == 'switching':
            break
        assert time.monotonic() < deadline, st
        time.sleep(0.02)
    t0 = time.monotonic()
    st = call(agent, 'volume-move-abort', volume_id='vol1')
    took = time.monotonic() - t0
    runner.join(60)
    assert not runner.is_alive()
    print('abort in the pause: %.2f s, %s' % (took, st))
    assert took < 2.0, took
    assert st['state'] == 'aborted', st
    assert st['error'] == 'aborted; the volume stays on the source', st
    wl.assert_clean()
    assert call(agent, 'volume-show', volume_id='vol1')['origin'] == a.uri
    wl.run(nops=100)
    wl.assert_clean()
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(a, orc)


def requests_of(origin, kind, start=0):
    """[(offset, count)] of ``kind`` ('Read', 'Write') reaching ``origin``.

    nbdkit's log filter's own record, from its log's ``start``.
    """
    with open(origin.server.nbd_log, 'r', errors='replace') as f:
        f.seek(start)
        text = f.read()
    return [(int(off, 16), int(n, 16)) for off, n in re.findall(
        r' %s id=\d+ offset=0x([0-9a-f]+) count=0x([0-9a-f]+)' % kind, text)]


# The VM's largest request in test_lr_copy_under_16_requests_in_flight
# (the workload's smallest max_length with 4 KiB blocks).
VM_MAX = 5 * 4096


def test_lr_copy_under_16_requests_in_flight(make_agent, make_origin, workdir):
    """LR's copy is not held up run by run by the VM's 16 requests in flight.

    A and B are disks that serve one request at a time, each 3 ms late
    (nbdkit's noparallel and delay filters, the benchmark's emulation of
    an HDD).  The VM keeps 16 requests in flight, 3 reads to 1 write of
    4 to 20 KiB all over the volume, from before the move to its end, so
    that by the time the copier reaches a chunk the VM has written to B
    in several places of it, which LR's copy skips.  The copier used to
    read and write each run between those grains in turn, every request
    waiting behind the VM's in the disk's queue: the issue 35 benchmark's
    LR moves under IOM_16 all timed out, and the VM's writes to the chunk
    being copied waited for all of it.  Now:

    * the copier reads A once per chunk (one request above 20 KiB, the
      VM's largest, per MiB in A's own log), and B gets no grain twice
      (no redundant writes: LR's "zero redundant writes");
    * the move ends within a generous bound of its rate-limited copy time
      (the rate limit, not the VM, sets its pace here: the count above is
      what failed before the fix, 77 reads of A for 8 chunks);
    * every read is checked against the oracle, and B ends equal to it.
    """
    disk = ['delay-read=3ms', 'delay-write=3ms']
    a_log, b_log = (os.path.join(workdir, n) for n in ('A.log', 'B.log'))
    agent, a, b, h, orc = setup(
        make_agent, make_origin,
        a_filters=['log', 'noparallel', 'delay'],
        a_args=['logfile=' + a_log] + disk,
        b_filters=['log', 'noparallel', 'delay'],
        b_args=['logfile=' + b_log] + disk)
    a.server.nbd_log, b.server.nbd_log = a_log, b_log
    wl = om.Workload(h, orc, seed=17, depth=16,
                     mix=[('read', 3), ('write', 1)], hot_fraction=1.0,
                     hot_share=1.0, unaligned_share=0,
                     max_length=VM_MAX)
    wl.run(duration=0.5)
    a0 = log_end(a)
    # 2 MB/s: 4 s of copy, the VM writing ahead of the cursor meanwhile.
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme='lr',
         rate_limit_mbps=2)
    t0 = time.monotonic()
    st = run_until(agent, wl, timeout=60)
    took = time.monotonic() - t0
    wl.assert_clean()
    big_reads = [r for r in requests_of(a, 'Read', a0) if r[1] > VM_MAX]
    print('lr under 16 in flight: %.1f s (copy alone about 4 s), %d reads '
          'of A above 20 KiB; %s; io %s' % (took, len(big_reads),
                                            wl.summary(), st['io']))
    assert st['state'] == 'done', st
    assert wl.counts['write'] > 200, wl.summary()
    assert st['io']['a_write_bytes'] == 0, st
    assert st['io']['redundant_write_bytes'] == 0, st
    assert len(big_reads) <= SIZE // MiB, big_reads
    assert took < 15, took
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(b, orc)


def most_at_once(origin, kind, min_count):
    """The most ``kind`` requests above ``min_count`` bytes in flight at once.

    From nbdkit's log filter, which logs each request as it arrives and
    again as it returns (on a server that takes requests in parallel).
    """
    now, most = set(), 0
    with open(origin.server.nbd_log, 'r', errors='replace') as f:
        for line in f:
            m = re.search(r'connection=(\d+) %s id=(\d+) offset=0x[0-9a-f]+ '
                          r'count=0x([0-9a-f]+)' % kind, line)
            if m and int(m.group(3), 16) > min_count:
                now.add(m.group(1, 2))
                most = max(most, len(now))
                continue
            m = re.search(r'connection=(\d+) \.\.\.%s id=(\d+) return' % kind,
                          line)
            if m:
                now.discard(m.group(1, 2))
    return most


def test_lr_copy_writes_a_chunks_runs_at_once(make_agent, make_origin,
                                              workdir):
    """LR's copier hands the runs of a chunk to B together.

    The runs between the grains the VM wrote are one write each (B gets
    no grain twice); B takes requests in parallel here, each 10 ms late,
    and its log shows several of the copier's writes (above the VM's 20
    KiB) in flight at once, where the copier used to write them one after
    the other.  Every read is checked against the oracle.
    """
    b_log = os.path.join(workdir, 'B.log')
    agent, a, b, h, orc = setup(
        make_agent, make_origin, b_filters=['log', 'delay'],
        b_args=['logfile=' + b_log, 'delay-write=10ms'])
    b.server.nbd_log = b_log
    wl = om.Workload(h, orc, seed=18, depth=16,
                     mix=[('read', 3), ('write', 1)], hot_fraction=1.0,
                     hot_share=1.0, unaligned_share=0, max_length=VM_MAX)
    call(agent, 'volume-move', volume_id='vol1', to=b.uri, scheme='lr',
         rate_limit_mbps=2)
    st = run_until(agent, wl, timeout=60)
    wl.assert_clean()
    most = most_at_once(b, 'Write', VM_MAX)
    print('lr: at most %d copier writes to B at once; io %s' % (most,
                                                                st['io']))
    assert st['state'] == 'done', st
    assert st['io']['redundant_write_bytes'] == 0, st
    assert most >= 2, most
    assert not om.verify_all(h, orc)
    om.close(h)
    call(agent, 'volume-detach', volume_id='vol1')
    origin_file_is_oracle(b, orc)
