# SPDX-License-Identifier: Apache-2.0
"""The ucache agent's default origin policy on real multipath and md devices.

os-brick hands Nova a multipath volume as /dev/dm-N and a replicated one
as /dev/md/NAME, neither under the default origin_prefixes: the agent
takes them as block devices by what they are (origin_block_devices = any,
origin/origin_policy.c).  This host's kernel has neither device-mapper
nor md, so the agent runs in user-mode-linux
(fcache_testkit/uml/umlvm.py, as test_dmcache_uml.py) with its default
origin configuration, and fcache_testkit/uml/guest/origins_ucache.py
builds a dm-multipath device (two loop devices over one LUN as its paths)
and an md raid1 (mdadm, over two loop devices), attaches each by its
os-brick name, writes through the NBD export, and refuses a path of the
multipath device, a member of the array, a mounted filesystem's disk,
the cache disk, a device-mapper device over the cache disk and a regular
file outside origin_prefixes.  The host then reads the written bytes in
the disk images themselves: on the LUN, and on both mirrors of the
raid1.  A loop device over the cache disk is refused
too (its backing device is followed as a dm device's slaves are).
"""

import json
import os
import random
import shutil
import subprocess
import tempfile

import pytest

from fcache_testkit.uml import umlvm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

GUEST = os.path.join(ROOT, 'fcache_testkit', 'uml', 'guest',
                     'origins_ucache.py')
# ubda is the cache; the LUN and the two mirrors back loop devices.
DISKS = [('flash_a', 48 << 20), ('lun', 16 << 20), ('md_a', 16 << 20),
         ('md_b', 16 << 20), ('mnt', 8 << 20)]
MODULES = ('dm-multipath', 'dm-round-robin', 'loop', 'md-mod', 'raid1')


@pytest.fixture(scope='module')
def agent_path():
    # The plain build, as test_dmcache_uml.py: ASan does not fit UML.
    private = os.environ.get('FCACHE_UML_AGENT_BIN')
    if private:
        return os.path.abspath(private)
    subprocess.check_call(['make', '-s', '-C',
                           os.path.join(ROOT, 'fcache_agent'), 'all'])
    return os.path.join(ROOT, 'fcache_agent', 'build', 'fcache-agent')


@pytest.fixture(scope='module')
def guest(agent_path):
    """One boot, the whole scenario: (the VM, its RESULT)."""
    d = tempfile.mkdtemp(prefix='fcuml-')
    vm = umlvm.UmlVM(d, disks=DISKS, modules=MODULES)
    try:
        res = vm.run('python3 ' + GUEST, env={'FCACHE_AGENT': agent_path},
                     timeout=100, cwd=ROOT)
        lines = [ln for ln in res.output.splitlines()
                 if ln.startswith('RESULT ')]
        assert lines, 'no RESULT line (rc %d):\n%s' % (res.rc,
                                                       res.output[-4000:])
        r = json.loads(lines[-1][len('RESULT '):])
        assert res.rc == 0 and r.get('ok'), (
            'guest scenario failed: %s\n%s' % (json.dumps(r, indent=1),
                                               res.output[-3000:]))
        print('guest: %.1f s' % res.elapsed)
        yield vm, r
    finally:
        shutil.rmtree(d, ignore_errors=True)


def image_holds(vm, disk, base, seed, extents):
    with open(vm.disk_path(disk), 'rb') as f:
        for i, (off, n) in enumerate(extents):
            f.seek(base + off)
            assert f.read(n) == random.Random(seed + i).randbytes(n), (
                '%s.img lacks the bytes written at %d' % (disk, off))


@pytest.mark.timeout(120)
def test_multipath_and_md_by_os_brick_names(guest):
    vm, r = guest
    print(json.dumps(r['multipath']), json.dumps(r['md']))
    # Attached by /dev/dm-N, and both paths carried its writes.
    assert r['multipath']['node'].startswith('/dev/dm-')
    assert min(r['multipath']['writes_per_path']) > 0
    assert r['md']['link'] == '/dev/md/fcr1'
    # The oracle, outside the guest: the bytes written through the export
    # are on the LUN, and on both mirrors of the raid1.
    extents = r['extents']
    image_holds(vm, 'lun', 0, 100, extents)
    for disk in ('md_a', 'md_b'):
        image_holds(vm, disk, r['md']['data_offsets'][disk], 200, extents)


@pytest.mark.timeout(120)
def test_refusals(guest):
    _, r = guest
    # Each with its reason (the guest checked errno and the device named).
    assert 'is in use' in r['mp_path_refused']
    assert 'is in use' in r['md_member_refused']
    assert 'mounted' in r['mounted_refused']
    assert "agent's cache" in r['cache_refused']
    assert "agent's cache" in r['over_cache_refused']
    assert 'regular file outside' in r['file_refused']
    assert 'origin_prefixes' in r['file_refused']
    # Nothing refused was left behind as a volume.
    assert r['volumes_left'] == {'volumes': []}


@pytest.mark.timeout(120)
def test_loop_over_cache_refused(guest):
    _, r = guest
    lc = r['loop_over_cache']
    assert not lc['ok'] and "agent's cache" in (lc['error'] or ''), lc
