# SPDX-License-Identifier: Apache-2.0
"""Online extend: the origin grows under a cached volume in use.

Cinder extends the volume, os-brick rescans the device (here: a loop
device whose file grew, ``losetup --set-capacity``, or a regular file that
grew), and ``volume-extend`` makes the agent serve the new size: the cache
bounds blocks by the new end before the export announces it.  A client
that connected before keeps its old size and its data; one that connects
after sees the new size, and every read, old end and new, equals the last
acknowledged write; after the detach the origin holds every write.
"""

import errno
import os
import subprocess
import threading

import pytest

from nova_ext import exception

from fcache_testkit import oracle as om

MiB = 1 << 20
BS = 4096
OLD = 16 * MiB
NEW = 24 * MiB
POLICIES = ['read_only', 'write_through', 'write_back']


@pytest.fixture
def growable(workdir):
    """Make an origin of OLD bytes as a loop device or a file; grow() it."""
    loops = []

    class Growable(object):
        def __init__(self, kind):
            self.backing = os.path.join(workdir, 'grow-%s.img' % kind)
            self.content = bytearray(os.urandom(OLD))
            with open(self.backing, 'wb') as f:
                f.write(self.content)
            self.path = self.backing
            if kind == 'block':
                self.path = subprocess.run(
                    ['losetup', '--find', '--show', self.backing],
                    check=True, stdout=subprocess.PIPE,
                    text=True).stdout.strip()
                loops.append(self.path)

        def grow(self, size):
            # A LUN's extension reads as zeroes, as a file's does.
            os.truncate(self.backing, size)
            self.content.extend(bytes(size - len(self.content)))
            if self.path != self.backing:
                subprocess.run(['losetup', '--set-capacity', self.path],
                               check=True)

        def read(self):
            with open(self.backing, 'rb') as f:
                return f.read()

    yield Growable
    for dev in loops:
        subprocess.run(['losetup', '-d', dev])


def attach(make_agent, origin, policy):
    agent = make_agent(writeback_interval_ms=3600000,
                       dirty_high_percent=100).start()
    uri = agent.attach('vol1', origin.path, cache_size=8 * MiB,
                       write_policy=policy)['export_uri']
    return agent, uri


@pytest.mark.parametrize('kind', ['block', 'file'])
@pytest.mark.parametrize('policy', POLICIES)
def test_extend_under_io(make_agent, growable, policy, kind):
    origin = growable(kind)
    orc = om.Oracle(bytes(origin.content))
    agent, uri = attach(make_agent, origin, policy)
    old = om.connect(uri)
    assert old.get_size() == OLD
    # The old last block cached (dirty with write_back) before the extend.
    old.pwrite(b'\x5a' * BS, OLD - BS)
    orc.write(OLD - BS, b'\x5a' * BS)

    # A client keeps writing and reading through the old connection while
    # the volume grows: none of its requests fails or reads wrong data.
    work = om.Workload(old, orc, seed=7, depth=8, region=(0, OLD))
    failures = []
    stop = threading.Event()

    def load():
        try:
            work.run(stop=stop, timeout=120)
        except Exception as exc:
            failures.append(exc)
    thread = threading.Thread(target=load, daemon=True)
    thread.start()

    origin.grow(NEW)
    orc.grow(NEW)
    assert agent.client().extend_volume('vol1') == {
        'volume_id': 'vol1', 'size': NEW}
    # Asked again: nothing changes.
    assert agent.client().extend_volume('vol1')['size'] == NEW
    assert agent.show('vol1')['size'] == NEW

    new = om.connect(uri)
    assert new.get_size() == NEW
    # Past the old end: zeroes from the origin, then what is written there.
    assert new.pread(MiB, NEW - MiB) == bytes(MiB)
    for byte, off, n in ((0xa5, OLD, 2 * BS), (0x3c, NEW - BS, BS)):
        new.pwrite(bytes([byte]) * n, off)
        orc.write(off, bytes([byte]) * n)
        assert new.pread(n, off) == bytes([byte]) * n
    # The old connection keeps its size.
    assert old.get_size() == OLD
    stop.set()
    thread.join(120)
    assert not thread.is_alive() and not failures, failures
    work.assert_clean()
    assert not om.verify_all(new, orc, 'after the extend')
    om.close(old)
    om.close(new)
    agent.detach('vol1')
    assert not om.compare(orc, origin.read(), 'origin after the detach')


def test_extended_volume_comes_back_at_its_new_size(make_agent, growable):
    """A restart after the extend: dirty blocks past the old end kept."""
    origin = growable('block')
    agent, uri = attach(make_agent, origin, 'write_back')
    origin.grow(NEW)
    assert agent.client().extend_volume('vol1')['size'] == NEW
    h = om.connect(uri)
    h.pwrite(b'\x77' * (4 * BS), NEW - 4 * BS)
    om.close(h)
    assert agent.show('vol1')['dirty_blocks'] == 4
    agent.kill()
    agent.start()
    assert agent.show('vol1')['size'] == NEW
    assert agent.show('vol1')['dirty_blocks'] == 4
    h = om.connect(uri)
    assert h.get_size() == NEW
    assert h.pread(4 * BS, NEW - 4 * BS) == b'\x77' * (4 * BS)
    om.close(h)
    agent.detach('vol1')
    assert origin.read()[NEW - 4 * BS:] == b'\x77' * (4 * BS)


def extend_error(agent, volume_id='vol1'):
    with pytest.raises(exception.AgentError) as info:
        agent.client().extend_volume(volume_id)
    return info.value


def test_extend_refusals(make_agent, make_origin, growable):
    agent = make_agent().start()
    assert extend_error(agent).errno == errno.ENOENT

    # An NBD origin's size is fixed per connection.
    nbd_origin = make_origin(OLD)
    agent.attach('nbd1', nbd_origin.uri, cache_size=4 * MiB)
    exc = extend_error(agent, 'nbd1')
    assert exc.errno == errno.EOPNOTSUPP
    assert 'detach and attach it again' in str(exc), exc

    # A cached partial last block cannot grow in place.
    odd = growable('file')
    os.truncate(odd.backing, OLD + 512)
    agent.attach('odd', odd.path, cache_size=4 * MiB)
    os.truncate(odd.backing, NEW)
    exc = extend_error(agent, 'odd')
    assert exc.errno == errno.EOPNOTSUPP
    assert 'not a multiple of the cache block' in str(exc), exc

    # Shrunk behind our back: refused, the old size still served.
    small = growable('block')
    uri = agent.attach('vol1', small.path, cache_size=4 * MiB,
                       write_policy='write_through')['export_uri']
    os.truncate(small.backing, OLD // 2)
    subprocess.run(['losetup', '--set-capacity', small.path], check=True)
    exc = extend_error(agent)
    assert exc.errno == errno.EINVAL
    assert 'does not shrink' in str(exc), exc
    assert agent.show('vol1')['size'] == OLD
    h = om.connect(uri)
    assert h.get_size() == OLD
    om.close(h)
    assert 'less than the %d it had' % OLD in agent.log()
    for vol in ('nbd1', 'odd', 'vol1'):
        agent.detach(vol)
