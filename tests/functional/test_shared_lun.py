# SPDX-License-Identifier: Apache-2.0
"""A LUN that two hosts see through block devices of their own.

Two iSCSI sessions to one LUN are two block devices, each with its own
page cache: what one host writes, the other's cache does not see.  Here
two loop devices over one file play the two sessions (each loop device
has its page cache above the shared file).  A live migration's
destination that read a block through its device before the switchover
must not serve that old copy after the source wrote the block: the
agent drops its device's cached pages at the switchover
(``fc_origin_invalidate``).
"""

import os
import subprocess

import pytest

from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

BS = mu.BS
MiB = mu.MiB
SIZE = 8 * MiB


@pytest.fixture
def lun(workdir):
    """The LUN's file and one loop device per host over it."""
    path = os.path.join(workdir, 'lun.img')
    content = harness.make_origin_file(path, SIZE, seed=4,
                                       filled_fraction=1.0)
    devices = []
    try:
        for _ in range(2):
            devices.append(subprocess.run(
                ['losetup', '--find', '--show', path], check=True,
                stdout=subprocess.PIPE, text=True).stdout.strip())
        yield content, devices
    finally:
        for d in devices:
            subprocess.run(['losetup', '-d', d])


@pytest.mark.parametrize('policy', ('write_through', 'write_back'))
def test_destination_reads_what_the_source_wrote(make_agent, lun, policy):
    content, (src_dev, dst_dev) = lun
    src, dst = mu.agent_pair(make_agent)
    res = src.attach('vol1', src_dev, cache_size=2 * MiB,
                     write_policy=policy)
    orc = om.Oracle(content)
    inc = mu.incoming_only(dst, 'vol1', dst_dev, 2 * MiB, policy,
                           strategy='none', src=src)
    # The destination reads the block through its own device before the
    # source has connected: write_through keeps the origin current, so
    # the origin answers (and this host's page cache keeps the block).
    off = 3 * MiB
    h_dst = om.connect(inc['export_uri'], name='dst-early')
    if policy == 'write_through':
        assert h_dst.pread(BS, off) == content[off:off + BS]
    else:
        # write_back: a read waits for the source; read the device itself
        # to put the block into this host's page cache.
        with open(dst_dev, 'rb') as f:
            f.seek(off)
            assert f.read(BS) == content[off:off + BS]
    om.close(h_dst)
    # The VM writes the block on the source.
    h = om.connect(res['export_uri'], name='vm')
    new = os.urandom(BS)
    h.pwrite(new, off)
    h.flush()
    orc.write(off, new)
    om.close(h)
    mu.outgoing_only(src, inc, 'vol1', 'none')
    mid = inc['migration_id']
    migration.start(src.client(), dst.client(), mid)
    migration.switchover(src.client(), dst.client(), mid)
    migration.finish(src.client(), dst.client(), mid, timeout_s=60)
    # The destination's cache is empty (strategy none): the block comes
    # from its device, which must not answer from the old page.
    h = om.connect(inc['export_uri'], name='vm-after')
    got = h.pread(BS, off)
    assert got == new, 'the destination served the block as it was ' \
        'before the source wrote it'
    assert not om.verify_all(h, orc)
    om.close(h)
    dst.detach('vol1')
