# SPDX-License-Identifier: Apache-2.0
"""After a restart, recovered dirty blocks wait for the volume to be claimed.

The host failed with dirty write_back blocks in its cache, its VM was
evacuated (``[fcache] evacuate_write_back = discard``) and wrote the origin
from another host; then the host came back and its agent restarted warm.
Its dirty blocks are older than the origin now: writing them back would
put old data over new.  So after a restart the agent writes none back
until the volume is claimed (doc/reference/ucache.rst, "Held write-back"):

* unclaimed: several write-back periods pass, the origin keeps the
  evacuated VM's newer data, ``volume-show`` says ``writeback: held`` and
  why; ``volume-detach`` with ``discard_dirty`` forgets the volume, says
  how many blocks it dropped, the origin still holds the newer data, and
  another restart brings nothing back;
* claimed (a client opening the export, as QEMU reconnecting after an
  agent restart under a running VM; ``volume-claim``; ``volume-attach``
  of the same volume; a plain ``volume-detach``): the write-back resumes
  and the origin gets the VM's blocks from the cache, as before;
* ``discard_dirty`` is refused while a client has the export open.

The oracle is the origin file itself, read directly.
"""

import errno
import os
import time

import pytest

from nova_ext import exception

from fcache_testkit import harness
from fcache_testkit import oracle as om

MiB = 1 << 20
BS = 4096
VOLUME_SIZE = 4 * MiB
BLOCKS = 16
OFF = 64 * BS
LEN = BLOCKS * BS
OLD = bytes([0x5a]) * LEN       # what the VM wrote here, before the crash
NEW = bytes([0xa5]) * LEN       # what it wrote after its evacuation
WB_MS = 100                     # the write-back period after the restart


def origin_range(origin):
    with open(origin.path, 'rb') as f:
        f.seek(OFF)
        return f.read(LEN)


def write_origin(origin, data):
    """Another host's write to the storage: the evacuated VM's."""
    fd = os.open(origin.path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, OFF)
        os.fsync(fd)
    finally:
        os.close(fd)


def crashed_with_dirty_blocks(make_agent, make_origin):
    """An agent killed (-9) with BLOCKS dirty blocks of volume vol1."""
    # No write-back before the crash: every block the VM wrote is dirty.
    agent = make_agent(cache_size='8M', writeback_interval_ms=3600 * 1000,
                       dirty_high_percent=100).start()
    origin = make_origin(VOLUME_SIZE, nbd=False)
    res = agent.attach('vol1', origin.uri, cache_size=2 * MiB,
                       write_policy='write_back')
    h = om.connect(res['export_uri'])
    h.pwrite(OLD, OFF)
    h.flush()
    om.close(h)
    del h
    shown = agent.show('vol1')
    assert shown['dirty_blocks'] == BLOCKS, shown
    assert shown['writeback'] == 'running', shown
    assert origin_range(origin) != OLD
    agent.kill()
    # The restarted agent writes back every WB_MS: a held write-back
    # shows within a few periods.
    agent.settings['writeback_interval_ms'] = WB_MS
    agent.write_config()
    return agent, origin, res['export_uri']


def restart(agent):
    agent.start()
    shown = agent.show('vol1')
    assert shown['state'] == 'attached', shown
    assert shown['dirty_blocks'] == BLOCKS, shown
    return shown


def assert_held(agent, origin, expect):
    """Ten write-back periods: the agent wrote nothing to the origin."""
    time.sleep(10 * WB_MS / 1000.0)
    shown = agent.show('vol1')
    assert origin_range(origin) == expect, 'the agent wrote stale blocks back'
    assert shown['dirty_blocks'] == BLOCKS, shown
    assert shown['writebacks'] == 0, shown
    assert shown['writeback'] == 'held', shown
    assert 'evacuated' in shown['writeback_held'], shown
    assert 'discard_dirty' in shown['writeback_held'], shown
    return shown


def test_evacuated_volume_is_held_then_discarded(make_agent, make_origin):
    agent, origin, _ = crashed_with_dirty_blocks(make_agent, make_origin)
    # Its VM, evacuated, writes the same blocks from another host.
    write_origin(origin, NEW)
    restart(agent)
    assert 'write-back is held until the volume is claimed' in \
        agent.run_log()
    assert_held(agent, origin, NEW)

    res = agent.client().detach_volume('vol1', discard_dirty=True)
    assert res == {'volume_id': 'vol1', 'dirty_blocks_dropped': BLOCKS}
    assert origin_range(origin) == NEW
    assert ('volume vol1 detached with discard_dirty: %d unwritten blocks '
            'dropped' % BLOCKS) in agent.run_log()
    assert agent.client().list_volumes() == {'volumes': []}
    # Nothing of it comes back: not after a clean restart, not after a
    # crash (the dropped blocks' records were cleared before the answer).
    agent.restart()
    assert agent.client().list_volumes() == {'volumes': []}
    agent.kill()
    agent.start()
    assert agent.client().list_volumes() == {'volumes': []}
    time.sleep(5 * WB_MS / 1000.0)
    assert origin_range(origin) == NEW


def claim_by_client(agent, export_uri):
    # What QEMU does when the agent is back: open the export again.
    h = om.connect(export_uri)
    # Reads and writes go on as ever: the VM reads what it wrote.
    assert h.pread(LEN, OFF) == OLD
    return h


def claim_by_op(agent, export_uri):
    res = agent.client().claim_volume('vol1')
    assert res == {'volume_id': 'vol1', 'writeback_was_held': True}
    res = agent.client().claim_volume('vol1')
    assert res == {'volume_id': 'vol1', 'writeback_was_held': False}


def claim_by_attach(agent, export_uri):
    # Nova attaching the volume again (the same parameters: idempotent).
    shown = agent.show('vol1')
    res = agent.attach('vol1', shown['origin'], cache_size=2 * MiB,
                       write_policy='write_back')
    assert res['export_uri'] == export_uri


@pytest.mark.parametrize('claim', [claim_by_client, claim_by_op,
                                   claim_by_attach],
                         ids=['client', 'volume-claim', 'volume-attach'])
def test_claimed_volume_writes_back(make_agent, make_origin, claim):
    agent, origin, export_uri = crashed_with_dirty_blocks(make_agent,
                                                          make_origin)
    before = origin_range(origin)
    restart(agent)
    assert_held(agent, origin, before)

    kept = claim(agent, export_uri)
    harness.wait_for(lambda: agent.show('vol1')['dirty_blocks'] == 0, 30,
                     'the write-back to resume once claimed')
    assert origin_range(origin) == OLD
    shown = agent.show('vol1')
    assert shown['writeback'] == 'running', shown
    assert 'writeback_held' not in shown, shown
    assert 'claims it: the write-back of its' in agent.run_log() or \
        'a client opened its export: the write-back' in agent.run_log()
    if kept is not None:
        om.close(kept)


def test_plain_detach_claims_and_writes_back(make_agent, make_origin):
    agent, origin, _ = crashed_with_dirty_blocks(make_agent, make_origin)
    before = origin_range(origin)
    restart(agent)
    assert_held(agent, origin, before)
    assert agent.detach('vol1') == {'volume_id': 'vol1'}
    assert origin_range(origin) == OLD


def test_discard_refused_while_the_export_is_open(make_agent, make_origin):
    agent, origin, export_uri = crashed_with_dirty_blocks(make_agent,
                                                          make_origin)
    restart(agent)
    h = om.connect(export_uri)
    harness.wait_for(lambda: agent.show('vol1').get('connections') == 1, 10,
                     'the client to be counted')
    with pytest.raises(exception.AgentError) as ei:
        agent.client().detach_volume('vol1', discard_dirty=True)
    assert ei.value.errno == errno.EBUSY, ei.value
    assert 'stop it first' in str(ei.value)
    # Nothing was dropped: the VM still reads its data.
    assert h.pread(LEN, OFF) == OLD
    om.close(h)


def test_discard_dirty_must_be_a_boolean(make_agent, make_origin):
    agent, _, _ = crashed_with_dirty_blocks(make_agent, make_origin)
    restart(agent)
    with pytest.raises(exception.AgentError) as ei:
        agent.client(unchecked=True).call('volume-detach', volume_id='vol1',
                                          discard_dirty='yes')
    assert ei.value.errno == errno.EINVAL
    assert agent.show('vol1')['dirty_blocks'] == BLOCKS
