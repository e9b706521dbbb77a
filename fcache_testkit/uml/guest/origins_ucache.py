# SPDX-License-Identifier: Apache-2.0
"""The ucache agent's default origin policy against real stacked devices.

Run inside UML by tests/functional/test_uml_origins.py: the agent runs with
its default origin configuration (engine ucache, default origin_prefixes
and origin_block_devices = any), its cache on $DEV_FLASH_A.  It attaches a
real dm-multipath device by its /dev/dm-N name (two loop devices over the
one LUN $DEV_LUN are its paths) and an md raid1 (mdadm, two loop devices
over $DEV_MD_A and $DEV_MD_B) by its /dev/md/NAME name, writes through the
export (NBD, libnbd) and reads the bytes back from the devices underneath;
then checks that what must not be an origin is refused, each with its
message, and records what becomes of a loop device over the cache disk.
Prints ``RESULT {json}``: the host re-reads the written bytes in the disk
images (offsets and seeds are in it).
"""

import errno
import os
import random
import sys

import nbd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_dmcache as ad  # noqa: E402
import dmutil  # noqa: E402

sh, dmsetup, pread = dmutil.sh, dmutil.dmsetup, dmutil.pread
blksize, report = dmutil.blksize, dmutil.report

AGENT = os.environ['FCACHE_AGENT']
RT = os.environ['UML_RT']
FLASH = os.environ['DEV_FLASH_A']
LUN = os.environ['DEV_LUN']
MD_A, MD_B = os.environ['DEV_MD_A'], os.environ['DEV_MD_B']
MNT_DEV = os.environ['DEV_MNT']
MiB = 1 << 20
# Where each volume is written: two extents, one of them unaligned to the
# agent's 4 KiB blocks (a read-modify-write of the block around it).
EXTENTS = [(1 * MiB, 256 * 1024), (5 * MiB + 1536, 136 * 512)]
out = ad.out                # what ad.check reports on a failure
check = ad.check


def data_for(seed, n):
    return random.Random(seed).randbytes(n)


class Agent(ad.Agent):
    """The ucache agent with nothing about origins in its configuration."""

    def config(self):
        return ('[agent]\ncontrol_socket = %s\nstate_dir = %s/state\n'
                'export_dir = %s/exports\ncache_path = %s\n'
                'cache_size = 40M\nlog_level = debug\n'
                'nbd_threads = 2\norigin_connections = 2\n' % (
                    self.sock, self.dir, self.dir, self.flash))


def losetup(backing):
    return sh('losetup --find --show --direct-io=on %s' % backing
              ).stdout.strip().splitlines()[-1]


def dm_node(name):
    """/dev/dm-N of a device-mapper device (its kernel name)."""
    minor = dmsetup('info -c --noheadings -o minor %s' % name).stdout.strip()
    node = '/dev/dm-%d' % int(minor)
    check(os.path.exists(node), 'no node %s' % node)
    return node


def io_counts(dev):
    """(reads, writes) completed by a block device, /sys/block/X/stat."""
    f = open('/sys/block/%s/stat' % os.path.basename(dev)).read().split()
    return int(f[0]), int(f[4])


def write_through_export(uri, seed):
    """Write EXTENTS through the export, read them back through it."""
    h = nbd.NBD()
    h.connect_uri(uri)
    try:
        for i, (off, n) in enumerate(EXTENTS):
            h.pwrite(data_for(seed + i, n), off)
        h.flush()
        for i, (off, n) in enumerate(EXTENTS):
            check(h.pread(n, off) == data_for(seed + i, n),
                  'export %s reads back other bytes at %d' % (uri, off))
        return h.get_size()
    finally:
        h.shutdown()


def check_on(dev, base, seed, what):
    """The bytes written are on `dev` at `base` + each extent's offset."""
    for i, (off, n) in enumerate(EXTENTS):
        start = (base + off) // 4096 * 4096
        end = -(-(base + off + n) // 4096) * 4096
        got = pread(dev, start, end - start)
        lo = base + off - start
        check(got[lo:lo + n] == data_for(seed + i, n),
              '%s: %s does not hold the bytes written at %d' % (
                  what, dev, off))


def attach(a, vid, origin, policy):
    r = a.ok('volume-attach', volume_id=vid, origin=origin, cache_size='8M',
             write_policy=policy)
    check(r['export_uri'].startswith('nbd+unix://'), r)
    return r['export_uri']


def refused(a, vid, origin, err_no, *phrases):
    r = a.call('volume-attach', volume_id=vid, origin=origin,
               cache_size='4M')
    check(not r.get('ok'), 'attach of %s succeeded: %r' % (origin, r))
    check(r.get('errno') == err_no, 'attach of %s: errno %r, not %d: %r' % (
        origin, r.get('errno'), err_no, r))
    for p in phrases:
        check(p in r.get('error', ''),
              'attach of %s: %r lacks %r' % (origin, r.get('error'), p))
    return r['error']


def main():
    # No udev here: mdadm makes its own nodes and /dev/md/ links, and
    # keeps its map in a /run of the guest's, not in the host's.
    sh('mount -t tmpfs -o size=4m tmpfs /run')
    a = Agent()
    a.start()

    # 1. dm-multipath: two paths (loop devices) to one LUN, round-robin
    # switching after every request, attached by its kernel name.
    paths = [losetup(LUN), losetup(LUN)]
    lun_sectors = blksize(LUN) // 512
    dmsetup("create fcmpath --table '0 %d multipath 0 0 1 1 round-robin 0 "
            "2 1 %s 1 %s 1'" % (lun_sectors, paths[0], paths[1]))
    mp = dm_node('fcmpath')
    st = dmsetup('status fcmpath').stdout
    check(st.count(' A ') == 2, 'multipath paths not both active: %s' % st)
    before = [io_counts(p) for p in paths]
    uri = attach(a, 'mp', mp, 'write_through')
    size = write_through_export(uri, seed=100)
    check(size == blksize(mp), 'export size %d, device %d' % (size,
                                                              blksize(mp)))
    # write_through: on the LUN before the detach.
    check_on(LUN, 0, 100, 'multipath (attached)')
    used = [io_counts(p)[1] - b[1] for p, b in zip(paths, before)]
    check(all(w > 0 for w in used), 'writes per path %r: not both paths '
          'carried them' % used)
    out['multipath'] = {'node': mp, 'writes_per_path': used}
    out['mp_path_refused'] = refused(a, 'mp-path', paths[1], errno.EBUSY,
                                     'is in use', paths[1])
    a.ok('volume-detach', volume_id='mp')
    dmsetup('remove fcmpath')
    check_on(LUN, 0, 100, 'multipath (detached)')

    # 2. md raid1 over two loop devices, by its /dev/md/NAME link.
    members = [losetup(MD_A), losetup(MD_B)]
    sh('mdadm --create /dev/md/fcr1 --name=fcr1 --level=1 '
       '--raid-devices=2 --metadata=1.2 --assume-clean --run %s %s' % (
           members[0], members[1]))
    md_link = '/dev/md/fcr1'
    check(os.path.islink(md_link), 'mdadm made no %s' % md_link)
    md_dev = os.path.realpath(md_link)
    mdname = os.path.basename(md_dev)
    offsets = {}
    for m, disk in zip(members, ('md_a', 'md_b')):
        sysf = '/sys/block/%s/md/dev-%s/offset' % (mdname,
                                                   os.path.basename(m))
        offsets[disk] = int(open(sysf).read()) * 512
    uri = attach(a, 'md', md_link, 'write_back')
    write_through_export(uri, seed=200)
    out['md_member_refused'] = refused(a, 'md-member', members[0],
                                       errno.EBUSY, 'is in use', members[0])
    # write_back: the detach writes the dirty blocks back.
    a.ok('volume-detach', volume_id='md')
    check_on(md_dev, 0, 200, 'raid1 (detached)')
    sh('mdadm --stop %s' % md_link)
    for m, disk in zip((MD_A, MD_B), ('md_a', 'md_b')):
        check_on(m, offsets[disk], 200, 'raid1 mirror %s' % disk)
    out['md'] = {'link': md_link, 'node': md_dev, 'data_offsets': offsets}

    # 3. What is not an origin.
    mnt = os.path.join(RT, 'mnt')
    os.makedirs(mnt, exist_ok=True)
    sh('mkfs.ext4 -q -F %s' % MNT_DEV)
    sh('mount %s %s' % (MNT_DEV, mnt))
    out['mounted_refused'] = refused(a, 'mounted', MNT_DEV, errno.EBUSY,
                                     'is in use', 'mounted')
    sh('umount %s' % mnt)
    out['cache_refused'] = refused(a, 'cache', FLASH, errno.EPERM,
                                   "the agent's cache", 'cache_path')
    # A device-mapper device over the flash disk's last MiB (outside the
    # cache's 40 MiB): it shares the cache's disk.
    fl_sectors = blksize(FLASH) // 512
    dmsetup("create fcoverflash --table '0 2048 linear %s %d'" % (
        FLASH, fl_sectors - 2048))
    over = dm_node('fcoverflash')
    out['over_cache_refused'] = refused(a, 'overcache', over, errno.EPERM,
                                        over, "the agent's cache")
    dmsetup('remove fcoverflash')
    # The same bytes through a loop device: sysfs lists no slaves for a
    # loop device (its backing is in loop/backing_file).
    loop = sh('losetup --find --show --offset %d --sizelimit %d %s' % (
        (fl_sectors - 2048) * 512, MiB, FLASH)).stdout.strip()
    r = a.call('volume-attach', volume_id='loopcache', origin=loop,
               cache_size='4M')
    out['loop_over_cache'] = {'loop': loop, 'ok': r.get('ok'),
                              'errno': r.get('errno'),
                              'error': r.get('error')}
    if r.get('ok'):
        a.ok('volume-detach', volume_id='loopcache')
    sh('losetup -d %s' % loop)
    f = os.path.join(RT, 'volume.img')
    with open(f, 'wb') as fh:
        fh.truncate(4 * MiB)
    out['file_refused'] = refused(a, 'file', f, errno.EPERM,
                                  'a regular file outside', 'origin_prefixes')
    vols = a.ok('volume-list')
    out['volumes_left'] = vols
    a.stop()
    for p in paths + members:
        sh('losetup -d %s' % p)
    sh('sync')
    out['extents'] = EXTENTS
    out['ok'] = True
    report(out)


if __name__ == '__main__':
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 -- reported to the host
        import traceback
        out['failed'] = '%s: %s' % (type(e).__name__, e)
        out['traceback'] = traceback.format_exc()[-2000:]
        report(out)
        sys.exit(1)
