# SPDX-License-Identifier: Apache-2.0
"""The connection's reader (fcache_agent/src/nbd/nbd_conn.c).

The thread reading a connection's requests serves small reads itself when
they need no waiting (hits in the page cache, misses started at an NBD
origin) and hands the others to a worker.  Both ways must give the
origin's data and count each read once, including a read the reader
started, gave up (a hit whose block left the page cache) and handed on.
"""

import os

from fcache_testkit import oracle as om

MiB = 1 << 20
BS = 4096


def _deltas(before, after):
    return {k: after[k] - before[k]
            for k in ('reads', 'read_hits', 'read_misses')}


def _drop_from_page_cache(path):
    """Write back and drop the cache file's pages.

    The next hits read the device, so the reader's page-cache-only read
    gives up on them and hands them on.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_reads_served_or_handed_on_are_right_and_counted_once(
        make_agent, make_origin):
    size = 8 * MiB
    blocks = size // BS
    agent = make_agent(cache_size='16M').start()
    origin = make_origin(size)
    uri = agent.attach('reader', origin.uri, cache_size=size,
                       write_policy='write_through')['export_uri']
    orc = om.Oracle(origin.content)
    h = om.connect(uri)

    passes = [('cold: misses', None),
              ('warm: hits from the page cache', None),
              ('hits read from the device', agent.cache_path)]
    for what, drop in passes:
        if drop:
            _drop_from_page_cache(drop)
        before = agent.show('reader')
        data = om.read_all(h, size, chunk=BS, depth=64)
        assert not om.compare(orc, data, what)
        d = _deltas(before, agent.show('reader'))
        assert d['reads'] == blocks, (what, d)
        if what.startswith('cold'):
            assert d == {'reads': blocks, 'read_hits': 0,
                         'read_misses': blocks}, d
        else:
            assert d == {'reads': blocks, 'read_hits': blocks,
                         'read_misses': 0}, (what, d)

    # Writes (always a worker's) among reads of the same blocks: every
    # read sees the last acknowledged write.
    wl = om.Workload(h, orc, seed=7)
    wl.run(nops=2000)
    wl.assert_clean()
    assert not om.verify_all(h, orc)
    om.close(h)
    agent.detach('reader')
    assert not om.compare(orc, origin.read_file(), 'origin file')
