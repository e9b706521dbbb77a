# SPDX-License-Identifier: Apache-2.0
"""The dmcache engine against the real kernel dm-cache, inside UML.

Each test boots Debian's user-mode-linux kernel (hostfs root, ubd disks
backed by sparse files: an origin and a host's flash device), runs one
scenario of fcache_testkit/uml/guest/ inside it with the real agent, and
checks its ``RESULT`` line.  Boot takes a few seconds; nothing is skipped: the
kernel, its modules and thin-provisioning-tools are installed by
tools/setup.sh.
"""

import json
import os
import shutil
import subprocess
import tempfile

import pytest

from fcache_testkit.uml import umlvm
from nova_ext import exception
from nova_ext import volume_move

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

GUEST = os.path.join(ROOT, 'fcache_testkit', 'uml', 'guest')
DISKS = [('origin', 64 << 20), ('flash_a', 48 << 20)]


@pytest.fixture(scope='module')
def agent_path():
    # The plain build: ASan's shadow mappings do not fit a UML guest.
    # FCACHE_UML_AGENT_BIN names a private plain build (FCACHE_AGENT_BIN
    # is the sanitizer build the other functional tests run).
    private = os.environ.get('FCACHE_UML_AGENT_BIN')
    if private:
        return os.path.abspath(private)
    subprocess.check_call(['make', '-s', '-C',
                           os.path.join(ROOT, 'fcache_agent'), 'all'])
    return os.path.join(ROOT, 'fcache_agent', 'build', 'fcache-agent')


def _vm(disks, modules=()):
    d = tempfile.mkdtemp(prefix='fcuml-')
    yield umlvm.UmlVM(d, disks=disks, modules=modules)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def vm():
    yield from _vm(DISKS)


@pytest.fixture
def vm_nbd():
    """One host's flash and the kernel NBD client (nbd.ko)."""
    yield from _vm(DISKS, modules=('nbd',))


@pytest.fixture
def vm_move():
    """One host's flash and two origins, A and B."""
    yield from _vm(DISKS + [('origin_b', 64 << 20)])


@pytest.fixture
def vm_mirror():
    """As vm_move, with dm-mirror (and the region log it is built on)."""
    yield from _vm(DISKS + [('origin_b', 64 << 20)],
                   modules=('dm-log', 'dm-region-hash', 'dm-mirror'))


@pytest.fixture
def vm2():
    """Two hosts' flash devices and one shared origin."""
    yield from _vm(DISKS + [('flash_b', 48 << 20)])


@pytest.fixture
def vm2_nbd():
    """Two hosts' flash devices, one shared origin, and nbd.ko."""
    yield from _vm(DISKS + [('flash_b', 48 << 20)], modules=('nbd',))


def run(vm, script, *args, env=None, timeout=240):
    cmd = 'python3 %s %s' % (os.path.join(GUEST, script), ' '.join(args))
    res = vm.run(cmd, env=env or {}, timeout=timeout, cwd=ROOT)
    lines = [ln for ln in res.output.splitlines() if ln.startswith('RESULT ')]
    assert lines, 'no RESULT line (rc %d):\n%s' % (res.rc, res.output[-4000:])
    result = json.loads(lines[-1][len('RESULT '):])
    assert res.rc == 0 and result.get('ok'), (
        'guest scenario failed: %s\n%s' % (json.dumps(result, indent=1),
                                           res.output[-3000:]))
    return result


# What a DBT move on dmcache (not built: doc/reference/storage-migration.rst,
# "Engines") would list each round with: dm-era's live metadata, through
# a metadata snapshot.
@pytest.mark.timeout(300)
def test_era_lists_writes_on_live_metadata(vm):
    facts = run(vm, 'era_live_facts.py')
    assert facts['live_metadata'].startswith('refused')
    assert facts['since_first'] == [3, 10, 11]
    assert facts['since_second'] == [10, 11]


@pytest.mark.timeout(300)
def test_kernel_facts(vm):
    facts = run(vm, 'kernel_facts.py')
    assert facts['block_placement'].startswith('cblock n at sector')
    assert facts['passthrough_with_dirty'] == 'refused'
    assert facts['passthrough_reads_origin']
    assert facts['write_hit_invalidates']
    assert facts['invalidate_cblocks_outside_passthrough'] == 'refused'
    # Upstream 0c5eef0aad50: the write completes only after the
    # invalidation is committed, so a crash right after it cannot bring
    # the stale block back.
    assert not facts['crash_copy_still_maps_written_block']
    assert facts['passthrough_after_crash'] == 'refused'


# The kernel facts under hybrid and cloudcache on dmcache (design in
# doc/reference/dmcache.rst): dm-clone whose source is a kernel NBD device
# fed from userspace over a socketpair, and dm-cache over that clone.
@pytest.mark.timeout(500)
def test_clone_over_nbd_facts(vm_nbd):
    f = run(vm_nbd, 'clone_nbd_facts.py', timeout=450)
    assert f['nbd_write_read_only'].startswith('refused')
    assert f['unhydrated_read_served_by_source']
    assert not f['reads_hydrate_region']
    assert not f['whole_region_write_reads_source']
    assert sum(n for _, n in f['partial_write_hydrates_region']) == 32768
    assert not f['reads_after_hydration_reach_source']
    assert f['destination_alone_holds_everything']
    pacing = f['hydration_pacing']
    assert (pacing['threshold 32 batch 32, 10 ms']['regions_per_s'] >
            2 * pacing['defaults, 10 ms']['regions_per_s'])
    assert f['disable_hydration_stops']['one_s_later'] < 256
    assert f['hydration_order'] == 'ascending region number'
    assert 'hydration_threshold 8' in f['hydration_knobs_by_message']
    assert f['origin_current_after_cleaner'] == 8
    assert f['restored_dirty_written_back']['source_reads']
    assert f['clone_mode_after_source_eio'] == 'rw'
    assert f['source_socket_closed_read'].startswith(os.strerror(5))
    assert f['quiet_source_timeout0'].startswith('blocked')
    assert f['quiet_source_timeout2']['errno'] == os.strerror(5)
    assert f['source_swapped_by_reload']['hydrated_kept'] > 0
    assert f['dead_socket_with_dead_conn_timeout'] == 'read held 3 s'
    assert 'seconds_after_reconfigure' in f['reconfigure_resumes_held_reads']
    assert f['inflight_read_after_reconfigure'].startswith('ok after')
    print('clone over nbd:', json.dumps(f, sort_keys=True))


# The relay's kernel side (dmcache/dm_nbd.c): /dev/nbdN connected through
# netlink to the agent's NBD server over a socketpair, served from a file
# by tools/nbd_kdev.c, which `make all` builds beside the agent (so a
# private FCACHE_UML_AGENT_BIN build has it too).
@pytest.mark.timeout(300)
def test_nbd_relay(vm_nbd, agent_path):
    kdev = os.path.join(os.path.dirname(agent_path), 'nbd_kdev')
    f = run(vm_nbd, 'nbd_relay.py', env={'NBD_KDEV': kdev})
    assert f['io']['relay']['flushes'] > 0
    assert f['clone_hydrated']['regions'] == 256
    assert f['disconnected']
    assert f['read_only_write'] == 'refused: ' + os.strerror(1)
    assert f['held_read_after_reattach_s'] < 30
    print('nbd relay:', json.dumps(f, sort_keys=True))


# The relay's source side (dmcache/dm_relay.c): the same device answered
# from the destination's cache-data layout, each block fetched with the
# migration's own fetch (fc_migr_dest_fetch_start) from a source played
# by tools/relay_kdev.c over a transfer stream.
@pytest.mark.timeout(300)
def test_relay_source(vm_nbd, agent_path):
    kdev = os.path.join(os.path.dirname(agent_path), 'relay_kdev')
    f = run(vm_nbd, 'relay_source.py', env={'RELAY_KDEV': kdev})
    assert f['reads']['zero_blocks'] > 0
    assert f['held_read_s'] >= 1.5
    assert f['clone_hydrated']['regions'] == 256
    assert f['clone_hydrated']['inflight_peak'] > 1
    print('relay source:', json.dumps(f, sort_keys=True))


@pytest.mark.timeout(300)
def test_attach_detach_restart_adoption_foreign(vm, agent_path):
    r = run(vm, 'agent_dmcache.py', 'lifecycle',
            env={'FCACHE_AGENT': agent_path})
    assert 'not created by this agent' in r['foreign_adopt']
    assert 'was not created' in r['foreign_attach']
    assert 'detach volume vol1 and attach it again' in r['volume_set']


@pytest.mark.timeout(400)
@pytest.mark.parametrize('policy',
                         ['read_only', 'write_through', 'write_back'])
def test_oracle_workload(vm, agent_path, policy):
    r = run(vm, 'agent_dmcache.py', 'oracle', policy,
            env={'FCACHE_AGENT': agent_path})
    assert r['read_hits'] > 0
    assert r['mode'] == ('writeback' if policy == 'write_back'
                         else 'writethrough')


@pytest.mark.timeout(300)
def test_failing_origin_is_eio_never_wrong_data(vm, agent_path):
    r = run(vm, 'agent_dmcache.py', 'faults', env={'FCACHE_AGENT': agent_path})
    for policy in ('write_through', 'write_back'):
        assert r[policy]['eio_reads'] > 0


# Each run moves one volume back and forth between two agents, once per
# strategy, with the VM stand-in reading and writing throughout (every
# read checked): none and cachemior after a write-back drain, firepan
# with dirty blocks moving as dirty, firepan_if rate-limited so that the
# VM writes while blocks arrive (dm-era records them, the kernel's
# passthrough mode and invalidate_cblocks drop them).
CHAIN = ('none', 'cachemior', 'firepan', 'firepan_if')


@pytest.mark.timeout(400)
@pytest.mark.parametrize('policy', ['write_through', 'write_back'])
def test_migration_between_agents(vm2, agent_path, policy):
    r = run(vm2, 'migrate_dmcache.py', policy, *CHAIN,
            env={'FCACHE_AGENT': agent_path})
    done = {m['strategy']: m for m in r['migrations']}
    assert sorted(done) == sorted(CHAIN)
    assert r['reads'] > 1000 and r['writes'] > 300
    for s in ('cachemior', 'firepan', 'firepan_if'):
        assert done[s]['cached_after'] > 0, done[s]
    assert done['firepan']['blocks_transferred'] > 0
    assert done['firepan_if']['era_written_blocks'] > 0
    if policy == 'write_back':
        assert done['firepan']['dirty_before'] > 0
    assert 'needs engine ucache' in r['refused_cloudcache']
    assert 'is a preview' in r['refused_hybrid']
    assert r['capabilities'] == {
        'none': True, 'cachemior': True, 'firepan': True,
        'firepan_if': True, 'cloudcache': False, 'hybrid': False}
    assert '"experimental": true' in r['capabilities_why']['hybrid']
    assert r['move_schemes'] == ['mirror', 'lr']


# hybrid on dmcache (a preview, "experimental": true): the destination's
# cache data is a dm-clone over /dev/nbdN, which the agent answers with
# the migration's FETCHes.  a -> b -> a, rate-limited so that the VM
# stand-in reads and writes (every read checked) while the clone hydrates;
# then the source agent killed mid-hydration: the destination fails the
# migration saying what is lost, and each read is the oracle's or EIO;
# the source agent restarted, the destination settles copying the rest
# from it (nothing lost); the destination agent killed and restarted
# mid-hydration takes its clone up again and settles the same way; once
# more with the source given up, the rest comes from the origin.
@pytest.mark.timeout(400)
@pytest.mark.parametrize('policy', ['read_only', 'write_through',
                                    'write_back'])
def test_hybrid_between_agents(vm2_nbd, agent_path, policy):
    r = run(vm2_nbd, 'migrate_dmcache_hybrid.py', policy,
            env={'FCACHE_AGENT': agent_path})
    assert 'is a preview' in r['refused']
    assert len(r['migrations']) == 2
    for m in r['migrations']:
        h = m['hydration']
        assert h['hydrated'] and h['regions_hydrated'] == h['regions_total']
        assert m['seen_partial']['regions_hydrated'] < h['regions_total']
        assert m['vm_ops_during_hydration'] > 0
        assert m['fetched_blocks'] > 0 and m['cached_after'] > 0
        if policy == 'write_back':
            assert h['restored_dirty_blocks'] > 0
        else:
            assert h['restored_dirty_blocks'] == 0
    for k in r['killed_source']:
        assert k['eio_reads'] > 0 and k['good_reads'] > 0
    assert r['killed_source'][0]['rebooted'] == (policy == 'write_back')
    for f in r['settled_from_destination']:
        assert f['result']['given_up_blocks'] == 0 and f['vm_ops_after'] > 0
    assert r['settled_from_destination'][0]['hydration']['settled_from_source']
    assert r['settled_from_destination'][0]['asked_from'] == 'source'
    assert r['settled_from_destination'][1]['asked_from'] == 'destination'
    d = r['killed_destination']
    assert d['eio_reads'] > 0 and d['good_reads'] > 0
    assert 'restarted' in d['volume_show']['error']
    assert d['rebooted'] == (policy == 'write_back')
    s = r['settled_lost']
    assert s['hydration']['from_origin'] and s['hydration']['hydrated']
    assert s['differing_blocks'] <= s['given_up_blocks']
    if policy != 'write_back':
        assert s['given_up_blocks'] == 0 and s['differing_blocks'] == 0
    assert s['vm_ops_after'] > 0
    print('hybrid %s:' % policy, json.dumps(r, sort_keys=True))


# volume-move on dmcache is dm-clone (lr in the kernel): the VM writes and
# reads (every read checked) while the origin moves from A to a slow B,
# through a kill -9 of the agent and a simulated reboot (every device
# removed) mid-move; B alone holds the volume afterwards.
@pytest.mark.timeout(400)
@pytest.mark.parametrize('policy', ['write_through', 'write_back'])
def test_volume_move_with_dm_clone(vm_move, agent_path, policy):
    r = run(vm_move, 'move_dmcache.py', policy,
            env={'FCACHE_AGENT': agent_path})
    assert 'needs engine ucache' in r['refused_dbt']
    assert 'cannot abort' in r['refused_abort']
    assert r['after_restart']['state'] in ('copying', 'done')
    assert r['done']['downtime_ms'] < 1000
    assert r['reads'] > 50 and r['writes'] > 50
    print('move:', json.dumps(r['done']), 'reads', r['reads'], 'writes',
          r['writes'], 'rebooted mid-move', r['rebooted_mid_move'])


# volume-move --scheme mirror on dmcache is dm-mirror (IO Mirroring in the
# kernel): the VM writes and reads (every read checked) while the origin
# moves from A to a slow B; one move aborted mid-copy and one whose B
# fails mid-copy (A alone holds the volume after each), one through a
# kill -9 of the agent and a simulated reboot (the copy starts over) to
# the switch (B alone holds it).
@pytest.mark.timeout(500)
@pytest.mark.parametrize('policy', ['write_through', 'write_back'])
def test_volume_move_with_dm_mirror(vm_mirror, agent_path, policy):
    r = run(vm_mirror, 'move_mirror_dmcache.py', policy,
            env={'FCACHE_AGENT': agent_path}, timeout=400)
    # What the agent publishes is what the CLI and the Nova driver choose
    # among (volume_move.agent_schemes reads it): auto takes one of them
    # even where it would take SLR among all, and dbt is refused before
    # any request reaches the agent.
    assert r['move_schemes'] == ['mirror', 'lr']
    assert volume_move.resolve_scheme('auto', 'ssd', 'hdd', 0.5)[0] == 'slr'
    assert volume_move.resolve_scheme(
        'auto', 'ssd', 'hdd', 0.5, schemes=r['move_schemes'])[0] in \
        r['move_schemes']
    with pytest.raises(exception.InvalidArgument) as refused:
        volume_move.resolve_scheme('dbt', 'ssd', 'hdd', 0.5,
                                   schemes=r['move_schemes'])
    assert 'runs only mirror, lr' in str(refused.value)
    assert 'needs engine ucache' in r['refused_dbt']
    assert 0 < r['aborted_at']['regions_in_sync'] < \
        r['aborted_at']['regions_total']
    assert 'back on its source' in r['b_failed']
    assert r['after_restart']['state'] in ('copying', 'done')
    assert r['done']['regions_in_sync'] == r['done']['regions_total']
    assert r['done']['downtime_ms'] < 1000
    assert r['reads'] > 50 and r['writes'] > 50
    print('mirror move:', json.dumps(r['done']), 'reads', r['reads'],
          'writes', r['writes'], 'rebooted mid-move', r['rebooted_mid_move'])
