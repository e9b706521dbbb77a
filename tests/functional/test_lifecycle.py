# SPDX-License-Identifier: Apache-2.0
"""Stop, detach and restart while clients are busy, and restarts that must
refuse (or wait) rather than lose unwritten data.
"""

import glob
import hashlib
import os
import random
import signal
import threading
import time

import pytest

from nova_ext import exception

from fcache_testkit import harness
from fcache_testkit import oracle as om

from .conftest import attach_and_connect

MiB = 1 << 20
BS = 4096
SIZE = 16 * MiB
POLICIES = ['read_only', 'write_through', 'write_back']


def later(delay, fn):
    t = threading.Timer(delay, fn)
    t.daemon = True
    t.start()
    return t


@pytest.mark.parametrize('policy', POLICIES)
def test_sigterm_under_load(make_agent, make_origin, policy):
    """SIGTERM with requests in flight: nothing acknowledged is lost.

    The shutdown is clean, so the cache stays warm.
    """
    agent = make_agent(cache_size='8M', writeback_interval_ms=200).start()
    origin = make_origin(SIZE, filters=['delay'],
                         filter_args=['rdelay=1ms', 'wdelay=1ms'])
    res, h = attach_and_connect(agent, 'vol1', origin, cache_size=2 * MiB,
                                write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=51, depth=24)

    def term():
        wl.disconnect_expected.set()
        agent.proc.send_signal(signal.SIGTERM)
    t = later(0.7, term)
    wl.run(duration=20, timeout=60)
    t.join(10)
    print(wl.summary())
    assert wl.dead and not wl.errors and not wl.mismatches
    assert agent.proc.wait(60) == 0, agent.run_log()[-3000:]
    del h

    agent.start()
    st = agent.show('vol1')
    assert st['cached_blocks'] > 0, st           # warm after a clean stop
    h = om.connect(res['export_uri'])
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)


@pytest.mark.parametrize('policy', POLICIES)
def test_detach_under_load_then_reattach(make_agent, make_origin, policy):
    """Detach under load: every acknowledged write reaches the origin.

    Detach disconnects the client; re-attaching the same id starts with an
    empty cache and the origin's (current) data.
    """
    agent = make_agent(cache_size='8M', writeback_interval_ms=1000,
                       dirty_high_percent=90).start()
    origin = make_origin(SIZE)
    res, h = attach_and_connect(agent, 'vol1', origin, cache_size=2 * MiB,
                                write_policy=policy)
    orc = om.Oracle(origin.content)
    wl = om.Workload(h, orc, seed=61, depth=24)
    detach_result = {}

    def detach():
        wl.disconnect_expected.set()
        try:
            detach_result['ok'] = agent.detach('vol1')
        except Exception as exc:      # reported below
            detach_result['error'] = exc
    t = later(0.7, detach)
    wl.run(duration=20, timeout=60)
    t.join(60)
    print(wl.summary())
    assert 'ok' in detach_result, detach_result
    assert wl.dead and not wl.errors and not wl.mismatches
    assert wl.counts['write'] > 50
    del h
    assert agent.status()['volumes'] == []
    assert agent.status()['used_bytes'] == 0
    mism = om.compare(orc, origin.read_file(), 'origin file after detach')
    assert not mism, mism

    # The same id again: nothing of the old cache may show through.
    res2, h = attach_and_connect(agent, 'vol1', origin, cache_size=2 * MiB,
                                 write_policy=policy)
    assert agent.show('vol1')['cached_blocks'] == 0
    mism = om.verify_all(h, orc)
    assert not mism, mism
    wl = om.Workload(h, orc, seed=62)
    wl.run(nops=1500)
    wl.assert_clean()
    om.close(h)
    agent.stop()
    agent.start()
    h = om.connect(res2['export_uri'])
    mism = om.verify_all(h, orc)
    assert not mism, mism
    om.close(h)


def digest(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_dirty(agent, uri, n, seed):
    h = om.connect(uri)
    rng = random.Random(seed)
    written = {}
    for i in range(n):
        off = (i * 37 % 256) * BS
        data = rng.randbytes(BS)
        h.pwrite(data, off)
        written[off] = data
    om.close(h)
    return written


@pytest.mark.parametrize('stop', ['sigterm', 'kill9'])
def test_geometry_change_with_dirty_data_refused(make_agent, make_origin,
                                                 stop):
    agent = make_agent(cache_size='4M', writeback_interval_ms=3600000,
                       dirty_high_percent=100).start()
    origin = make_origin(2 * MiB, nbd=False)
    uri = agent.attach('vol1', origin.uri, cache_size=MiB,
                       write_policy='write_back')['export_uri']
    written = write_dirty(agent, uri, 16, seed=3)
    assert agent.show('vol1')['dirty_blocks'] == 16
    if stop == 'sigterm':
        agent.stop()
    else:
        agent.kill()
    files = [agent.meta_path, agent.cache_path, origin.path] + \
        glob.glob(os.path.join(agent.state_dir, 'volumes', '*'))
    before = {p: digest(p) for p in files}

    for change in (dict(cache_size='8M'), dict(block_size='8K')):
        saved = dict(agent.settings)
        agent.settings.update(change)
        agent.write_config()
        rc, log = agent.start_expect_failure()
        assert rc != 0, log
        assert 'cache.meta' in log and 'unwritten' in log, log
        # The cache image may have grown (it is allocated before the
        # metadata is read); its first 4 MiB, the metadata, the origin and
        # the volume state must not have changed.
        for p in files:
            if p == agent.cache_path:
                with open(p, 'rb') as f:
                    head = f.read(4 * MiB)
                assert hashlib.sha256(head).hexdigest() == before[p], change
            else:
                assert digest(p) == before[p], (p, change)
        agent.settings = saved
        agent.write_config()

    agent.start()
    assert agent.show('vol1')['dirty_blocks'] == 16
    h = om.connect(uri)
    for off, data in written.items():
        assert h.pread(BS, off) == data
    om.close(h)
    # Once written back, the geometry may change: the clean map is dropped.
    agent.detach('vol1')
    # A new attachment, a new export name.
    uri = agent.attach('vol1', origin.uri, cache_size=MiB,
                       write_policy='write_back')['export_uri']
    agent.stop()
    agent.settings['cache_size'] = '8M'
    agent.write_config()
    agent.start()
    assert agent.status()['capacity_bytes'] == 8 * MiB
    h = om.connect(uri)
    for off, data in written.items():
        assert h.pread(BS, off) == data
    om.close(h)


def test_origin_unavailable_at_restart_keeps_dirty_blocks(make_agent,
                                                          make_origin):
    # origin_retry_ms 0: no retry until the next start (the test below has
    # the agent retry by itself).
    agent = make_agent(cache_size='4M', writeback_interval_ms=3600000,
                       dirty_high_percent=100, origin_retry_ms=0).start()
    origin = make_origin(2 * MiB)
    uri = agent.attach('vol1', origin.uri, cache_size=MiB,
                       write_policy='write_back')['export_uri']
    written = write_dirty(agent, uri, 16, seed=4)
    agent.stop()
    origin.server.stop()

    agent.start()
    st = agent.show('vol1')
    print(st)
    assert st['state'] == 'unavailable', st
    assert origin.server.socket in st.get('error', ''), st
    assert st['dirty_blocks'] == 16, st
    with pytest.raises(exception.AgentError) as ei:
        agent.detach('vol1')
    assert 'unwritten' in ei.value.error, ei.value.error
    # Everything else works meanwhile.
    other = make_origin(MiB, nbd=False)
    agent.attach('other', other.path, cache_size=MiB)
    agent.detach('other')

    origin.server.start()
    agent.stop()
    agent.start()
    st = agent.show('vol1')
    assert st['state'] == 'attached' and st['dirty_blocks'] == 16, st
    h = om.connect(uri)
    for off, data in written.items():
        assert h.pread(BS, off) == data
    om.close(h)
    agent.detach('vol1')
    image = origin.read_file()
    for off, data in written.items():
        assert image[off:off + BS] == data


def test_origin_back_after_start_serves_the_volume_again(make_agent,
                                                         make_origin):
    """Storage that comes up after the agent: the agent retries it.

    The volume's origin is down when the agent starts, so the volume is
    unavailable with its 16 unwritten blocks held; once the origin is up
    again, the agent opens it by itself within origin_retry_ms, gives the
    volume its blocks back and serves the same export: every block reads
    as last written (the unwritten ones from the cache, the rest from the
    origin) and a detach writes them back.
    """
    agent = make_agent(cache_size='4M', writeback_interval_ms=3600000,
                       dirty_high_percent=100, origin_retry_ms=200).start()
    origin = make_origin(2 * MiB)
    uri = agent.attach('vol1', origin.uri, cache_size=MiB,
                       write_policy='write_back')['export_uri']
    written = write_dirty(agent, uri, 16, seed=5)
    agent.stop()
    origin.server.stop()

    agent.start()
    st = agent.show('vol1')
    assert st['state'] == 'unavailable' and st['dirty_blocks'] == 16, st
    # Retried while down: still unavailable, still holding its blocks.
    time.sleep(1.0)
    st = agent.show('vol1')
    assert st['state'] == 'unavailable' and st['dirty_blocks'] == 16, st
    assert not os.path.exists(uri.split('socket=')[1])

    origin.server.start()
    harness.wait_for(lambda: agent.show('vol1')['state'] == 'attached', 10,
                     'the agent to open the origin again')
    st = agent.show('vol1')
    assert st['dirty_blocks'] == 16 and st['export_uri'] == uri, st
    assert not st.get('error'), st
    assert 'opens again' in agent.log()
    h = om.connect(uri)
    for off in range(0, 2 * MiB, BS):
        want = written.get(off, origin.content[off:off + BS])
        assert h.pread(BS, off) == want, off
    h.pwrite(b'\x5a' * BS, 300 * BS)
    h.flush()
    om.close(h)
    agent.detach('vol1')
    image = origin.read_file()
    for off, data in written.items():
        assert image[off:off + BS] == data
    assert image[300 * BS:301 * BS] == b'\x5a' * BS
