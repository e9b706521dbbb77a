# SPDX-License-Identifier: Apache-2.0
"""Check, inside UML, the dm-cache facts the dmcache engine relies on.

Run by tests/functional/test_dmcache_uml.py::test_kernel_facts; prints one
``RESULT {json}`` line with what was observed and exits non-zero on the
first fact that does not hold.  Devices: $DEV_ORIGIN, $DEV_FLASH_A.
"""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmutil import (cache_status, dmsetup, pattern, pread, pwrite,  # noqa
                    report, sh, blksize)

ORIGIN = os.environ['DEV_ORIGIN']
FLASH = os.environ['DEV_FLASH_A']
BS = 64                      # sectors: 32 KiB, the smallest block size
BSB = BS * 512
META_SECT = 8192             # 4 MiB
DATA_SECT = 64 * BS          # 64 cache blocks
facts = {'kernel': os.uname().release}


def fail(msg):
    facts['failed'] = msg
    report(facts)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def table(mode, policy='smq', meta='/dev/mapper/kf-meta'):
    osz = blksize(ORIGIN) // 512
    return ('0 %d cache %s /dev/mapper/kf-data %s %d 1 %s %s 0' %
            (osz, meta, ORIGIN, BS, mode, policy))


def create(mode, policy='smq', meta='/dev/mapper/kf-meta'):
    dmsetup("create kf --table '%s'" % table(mode, policy, meta))


def reload(mode, policy='smq', check_rc=True):
    dmsetup('suspend kf')
    p = dmsetup("reload kf --table '%s'" % table(mode, policy),
                check=False)
    r = dmsetup('resume kf', check=False)
    if check_rc and (p.returncode or r.returncode):
        raise RuntimeError('reload %s: %s %s' % (mode, p.stdout, r.stdout))
    return p.returncode or r.returncode, p.stdout + r.stdout


def promote(blocks, rounds=8):
    # smq promotes blocks that keep being hit; re-read until they are in.
    for _ in range(rounds):
        for ob in blocks:
            pread('/dev/mapper/kf', ob * BSB, BSB)
        if cache_status('kf')['used'] >= len(blocks):
            return
        time.sleep(0.3)


def dump_xml(meta):
    return sh('cache_dump %s' % meta).stdout


def mappings(xml):
    return {int(c): (int(o), d == 'true') for c, o, d in re.findall(
        r'<mapping cache_block="(\d+)" origin_block="(\d+)" '
        r'dirty="(\w+)"', xml)}


# The flash device carved by hand as the engine does: metadata, then data.
dmsetup("create kf-meta --table '0 %d linear %s 0'" % (META_SECT, FLASH))
dmsetup("create kf-data --table '0 %d linear %s %d'" % (
    DATA_SECT, FLASH, META_SECT))
sh('dd if=/dev/zero of=/dev/mapper/kf-meta bs=4096 count=1 oflag=direct')
nob = blksize(ORIGIN) // BSB
for ob in range(32):
    pwrite(ORIGIN, ob * BSB, pattern('ob%d' % ob, BSB))

# 1. Cache block n sits at sector n * block_size of the data device.
create('writethrough')
promote(list(range(8)))
st = cache_status('kf')
check(st['used'] >= 1, 'nothing promoted: %s' % st['raw'])
facts['promoted'] = st['used']
dmsetup('remove kf')
xml = dump_xml('/dev/mapper/kf-meta')
check('<superblock' in xml and 'block_size="%d"' % BS in xml,
      'cache_dump superblock: %s' % xml[:300])
maps = mappings(xml)
check(maps, 'cache_dump lists no mapping after clean remove')
for cb, (ob, dirty) in maps.items():
    got = pread('/dev/mapper/kf-data', cb * BSB, BSB)
    check(got == pattern('ob%d' % ob, BSB),
          'cache block %d (origin %d) not at sector %d' % (cb, ob, cb * BS))
facts['block_placement'] = 'cblock n at sector n*block_size (%d mappings)' % (
    len(maps))
facts['hints_in_dump'] = '<hint ' in xml

# 2. cache_restore works only on metadata no live table holds.
sh('cache_dump /dev/mapper/kf-meta -o /tmp/kf.xml'.replace(
    '/tmp', os.environ['UML_RT']))
create('writethrough')
p = sh('cache_restore -i %s/kf.xml -o /dev/mapper/kf-meta' %
       os.environ['UML_RT'], check=False)
check(p.returncode != 0, 'cache_restore onto live metadata succeeded')
facts['restore_live_refused'] = p.stdout.strip().splitlines()[-1:]
p = sh('cache_dump /dev/mapper/kf-meta', check=False)
facts['dump_live'] = 'rc=%d' % p.returncode

# 3. Passthrough: refused with dirty blocks; reads come from origin; a
#    write hit invalidates the block; invalidate_cblocks needs it.
rc, msg = reload('writeback')
pwrite('/dev/mapper/kf', 0, pattern('dirty0', BSB))
pread('/dev/mapper/kf', 0, BSB)
st = cache_status('kf')
facts['dirty_after_write'] = st['dirty']
if st['dirty']:
    rc, msg = reload('passthrough', check_rc=False)
    facts['passthrough_with_dirty'] = 'refused' if rc else 'accepted'
    check(rc != 0, 'passthrough accepted with %d dirty blocks' % st['dirty'])
    # Recover: the failed resume leaves the old (writeback) table; drain.
    dmsetup('resume kf', check=False)
    reload('writeback', policy='cleaner')
    for _ in range(50):
        if cache_status('kf')['dirty'] == 0:
            break
        time.sleep(0.2)
    check(cache_status('kf')['dirty'] == 0, 'cleaner did not drain')
    facts['cleaner_drains'] = True
    check(pread(ORIGIN, 0, BSB) == pattern('dirty0', BSB),
          'cleaner did not write the dirty block to origin')
p = dmsetup('message kf 0 invalidate_cblocks 0', check=False)
facts['invalidate_cblocks_outside_passthrough'] = (
    'refused' if p.returncode else 'accepted')
check(p.returncode != 0, 'invalidate_cblocks accepted in writeback')
reload('passthrough')
st0 = cache_status('kf')
# Change a cached block's origin under the cache: passthrough must show it.
dmsetup('remove kf')
maps = mappings(dump_xml('/dev/mapper/kf-meta'))
create('passthrough')
cached = sorted(ob for ob, _ in maps.values())
check(len(cached) >= 2, 'need 2 cached blocks, have %r' % cached)
ob_r, ob_w = cached[0], cached[1]
pwrite(ORIGIN, ob_r * BSB, pattern('new%d' % ob_r, BSB))
check(pread('/dev/mapper/kf', ob_r * BSB, BSB) == pattern('new%d' % ob_r,
                                                          BSB),
      'passthrough read did not come from origin')
facts['passthrough_reads_origin'] = True
st0 = cache_status('kf')
pwrite('/dev/mapper/kf', ob_w * BSB, pattern('pw%d' % ob_w, BSB))
# Right after the write completes, copy the metadata as a crash would
# leave it: with upstream fix 0c5eef0aad50 the write completes only after
# the invalidation is committed, so the copy no longer maps the block.
sh('dd if=/dev/mapper/kf-meta of=%s/crash.meta bs=1M iflag=direct '
   'status=none' % os.environ['UML_RT'])
st1 = cache_status('kf')
facts['write_hit_invalidates'] = st1['used'] == st0['used'] - 1
check(st1['used'] == st0['used'] - 1,
      'write hit in passthrough did not invalidate: %s -> %s' % (
          st0['raw'], st1['raw']))
sh('losetup -f %s/crash.meta' % os.environ['UML_RT'], check=False)
xml = sh('cache_dump %s/crash.meta' % os.environ['UML_RT'],
         check=False).stdout
crash_maps = {ob for ob, _ in mappings(xml).values()}
facts['crash_copy_still_maps_written_block'] = ob_w in crash_maps
# invalidate_cblocks in passthrough: takes cache block numbers.
cb = [c for c, (o, _) in maps.items() if o == ob_r][0]
st0 = cache_status('kf')
dmsetup('message kf 0 invalidate_cblocks %d' % cb)
st1 = cache_status('kf')
check(st1['used'] == st0['used'] - 1, 'invalidate_cblocks did nothing')
facts['invalidate_cblocks_in_passthrough'] = 'cblock %d dropped' % cb
dmsetup('remove kf')

# 4. A crash (no clean shutdown): every block is taken as dirty.
sh('dd if=/dev/zero of=/dev/mapper/kf-meta bs=4096 count=1 oflag=direct')
create('writethrough')
promote(list(range(16, 24)))
time.sleep(1.5)               # the periodic commit (1 s) has run
sh('dd if=/dev/mapper/kf-meta of=%s/crash2.meta bs=1M iflag=direct '
   'status=none' % os.environ['UML_RT'])
dmsetup('remove kf')
sh('dd if=%s/crash2.meta of=/dev/mapper/kf-meta bs=1M oflag=direct '
   'status=none' % os.environ['UML_RT'])
with open('%s/crash2.meta' % os.environ['UML_RT'], 'rb') as f:
    sb_flags = int.from_bytes(f.read(8)[4:8], 'little')
create('writeback')
st = cache_status('kf')
# Recorded, not asserted: what this kernel does with a superblock whose
# CLEAN_SHUTDOWN flag (bit 0) is clear; see doc/reference/dmcache.rst.
facts['after_crash'] = {'used': st['used'], 'dirty': st['dirty'],
                        'superblock_flags': sb_flags}
check(st['used'] > 0, 'crash copy lost the mappings: %s' % st['raw'])
rc, msg = reload('passthrough', check_rc=False)
facts['passthrough_after_crash'] = 'refused' if rc else 'accepted'
dmsetup('resume kf', check=False)
dmsetup('remove kf')
dmsetup('remove kf-data')
dmsetup('remove kf-meta')
facts['ok'] = True
report(facts)
