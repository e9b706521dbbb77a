# SPDX-License-Identifier: Apache-2.0
"""Edge cases: tiny origins, long paths, racing clients, bad configs."""

import errno
import os
import random
import threading

import pytest

from nova_ext import exception

from fcache_testkit import harness
from fcache_testkit import oracle as om

MiB = 1 << 20
BS = 4096


@pytest.mark.parametrize('size', [512, BS, BS + 512, 3 * BS + 1536])
@pytest.mark.parametrize('policy', ['write_through', 'write_back'])
def test_tiny_origin(make_agent, make_origin, size, policy):
    """Origins of less than a block, or not a whole number of blocks."""
    agent = make_agent(cache_size='1M').start()
    origin = make_origin(size, nbd=False, filled_fraction=1.0)
    uri = agent.attach('tiny', origin.path, cache_size=64 * 1024,
                       write_policy=policy)['export_uri']
    h = om.connect(uri)
    assert h.get_size() == size
    orc = om.Oracle(origin.content)
    assert not om.verify_all(h, orc)
    rng = random.Random(size)
    for _ in range(50):
        n = rng.randint(1, size // 512) * 512
        off = rng.randint(0, (size - n) // 512) * 512
        data = rng.randbytes(n)
        h.pwrite(data, off)
        orc.write(off, data)
        off = rng.randint(0, (size - 512) // 512) * 512
        assert orc.check(off, h.pread(512, off)) is None
    wl = om.Workload(h, orc, seed=size, block=512, max_length=size)
    wl.run(nops=300)
    wl.assert_clean()
    assert not om.verify_all(h, orc)
    om.close(h)
    agent.stop()
    agent.start()
    h = om.connect(uri)
    assert not om.verify_all(h, orc)
    om.close(h)
    agent.detach('tiny')
    assert not om.compare(orc, origin.read_file(), 'origin file')


def test_export_path_too_long(make_agent, make_origin, workdir):
    long_dir = os.path.join(workdir, 'e' * 60)
    agent = make_agent(cache_size='4M', export_dir=long_dir).start()
    origin = make_origin(MiB, nbd=False)
    vid = 'v' * 64
    with pytest.raises(exception.AgentError) as ei:
        agent.attach(vid, origin.path, cache_size=MiB)
    assert ei.value.errno == errno.ENAMETOOLONG, ei.value
    assert 'export_dir' in ei.value.error or 'socket' in ei.value.error
    st = agent.status()
    assert st['volumes'] == [] and st.get('reserved_bytes', 0) == 0, st
    assert os.listdir(os.path.join(agent.state_dir, 'volumes')) == []
    # A short id fits, and the space that the failed attach asked for is
    # free again.
    agent.attach('v', origin.path, cache_size=4 * MiB)
    agent.stop()
    agent.start()
    assert [v['volume_id'] for v in agent.status()['volumes']] == ['v']


def test_racing_attaches(make_agent, make_origin):
    """Many clients attach the same id at once: one volume, one answer."""
    # Fixed partitions, so the reservation shows that one volume won.
    agent = make_agent(cache_size='8M', allocation='fixed').start()
    origin = make_origin(MiB, nbd=False)
    other = make_origin(MiB, nbd=False)
    results = []
    lock = threading.Lock()

    def attach(i):
        # Half ask for the same thing, half for another origin.
        o = origin if i % 2 else other
        try:
            r = agent.client().attach_volume('racy', o.path, cache_size=MiB)
            out = ('ok', o.path, r['export_uri'])
        except exception.AgentError as exc:
            out = ('error', o.path, exc.errno)
        with lock:
            results.append(out)

    threads = [threading.Thread(target=attach, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 12
    winner = agent.show('racy')['origin']
    for kind, path, what in results:
        if path == winner:
            assert kind == 'ok', results
        else:
            assert (kind, what) == ('error', errno.EEXIST), results
    st = agent.status()
    assert len(st['volumes']) == 1 and st['reserved_bytes'] == MiB, st


@pytest.mark.parametrize('text,words', [
    ('[agent]\nno_such_key = 1\n', ['no_such_key', ':2']),
    ('[agent]\ncache_size = 12Q\n', ['cache_size', ':2']),
    ('[agent]\nblock_size = 3000\n', ['block_size']),
    ('[agent]\ncache_size = 6K\nblock_size = 4K\n', ['cache_size']),
    ('[agent]\nstate_dir = relative/dir\n', ['state_dir']),
    ('[agent]\nlog_level = loud\n', ['log_level']),
    ('[agent]\nnbd_threads = 0\n', ['nbd_threads']),
    ('[agent]\ncache_size = 1M\ncache_size = 2M\n', ['cache_size']),
    ('cache_size = 1M\n', ['cache_size']),
    ('[nope]\ncache_size = 1M\n', ['nope']),
    ('[agent]\nengine = dmcache2\n', ['engine']),
])
def test_bad_config(agent_binary, workdir, text, words):
    a = harness.Agent(agent_binary, workdir, name='badcfg')
    with open(a.config_path, 'w') as f:
        f.write(text)
    a._spawn()
    rc = a.proc.wait(30)
    log = a.run_log()
    assert rc != 0, log
    lines = [ln for ln in log.splitlines() if ln.strip()]
    assert lines, 'no message'
    for w in words:
        assert w in log, (w, log)
    assert a.config_path in log or 'engine' in log, log
    assert not harness.sanitizer_reports(log), log
    # Nothing was created.
    assert not os.path.exists(a.state_dir)
