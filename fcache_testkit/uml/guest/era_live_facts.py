# SPDX-License-Identifier: Apache-2.0
"""Check, inside UML, what a DBT move on dmcache would build on: dm-era.

A DBT round has to list the blocks the VM wrote since the round began
while the VM goes on writing, so the era table stays loaded.  Checked
here: era_invalidate refuses the live metadata itself, but with
``take_metadata_snap`` it reads the snapshot of the live metadata
(``--metadata-snapshot``) and lists exactly the blocks written in the
eras asked for, ended by a ``checkpoint``; the table keeps serving
throughout.  Devices: $DEV_ORIGIN, $DEV_FLASH_A.  Prints ``RESULT
{json}``.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dmutil  # noqa: E402

ORIGIN = os.environ['DEV_ORIGIN']
FLASH = os.environ['DEV_FLASH_A']
BLOCK = 64 * 1024                    # era block: 128 sectors
facts = {}
fail, check = dmutil.checks(facts)


def era_invalidate(*args):
    argv = ('era_invalidate',) + args + ('/dev/mapper/ef-meta',)
    return subprocess.run(argv, capture_output=True, text=True)


def listed(xml):
    """The era blocks an era_invalidate XML names."""
    blocks = set(int(b) for b in re.findall(r'<block block="(\d+)"', xml))
    for b, e in re.findall(r'<range begin="(\d+)" end\s*=\s*"(\d+)"', xml):
        blocks.update(range(int(b), int(e)))
    return blocks


def write(block, n=1):
    dmutil.pwrite('/dev/mapper/ef', block * BLOCK, b'w' * (n * BLOCK))


def era_now():
    # "<md block> <used>/<total> <current era> <snap root|->"
    return int(dmutil.dmsetup('status ef').stdout.split()[5])


def main():
    sectors = dmutil.blksize(ORIGIN) // 512
    dmutil.pwrite(FLASH, 0, bytes(4096))
    dmutil.dmsetup("create ef-meta --table '0 16384 linear %s 0'" % FLASH)
    dmutil.dmsetup("create ef --table '0 %d era /dev/mapper/ef-meta %s %d'"
                   % (sectors, ORIGIN, BLOCK // 512))
    first = era_now()
    write(3)
    dmutil.dmsetup('message ef 0 checkpoint')
    second = era_now()
    check(second == first + 1, 'checkpoint did not start an era')
    write(10, 2)
    r = era_invalidate('--written-since', str(first))
    check(r.returncode != 0, 'era_invalidate read live metadata')
    facts['live_metadata'] = 'refused: ' + r.stderr.strip().splitlines()[0]
    dmutil.dmsetup('message ef 0 checkpoint')
    dmutil.dmsetup('message ef 0 take_metadata_snap')
    write(20)                      # after the snapshot: not in it
    r = era_invalidate('--metadata-snapshot', '--written-since', str(first))
    check(r.returncode == 0, 'snapshot listing failed: %s' % r.stderr)
    facts['since_first'] = sorted(listed(r.stdout))
    check(facts['since_first'] == [3, 10, 11], r.stdout)
    r = era_invalidate('--metadata-snapshot', '--written-since', str(second))
    facts['since_second'] = sorted(listed(r.stdout))
    check(facts['since_second'] == [10, 11], r.stdout)
    dmutil.dmsetup('message ef 0 drop_metadata_snap')
    facts['served_throughout'] = dmutil.pread('/dev/mapper/ef', 20 * BLOCK,
                                              4096) == b'w' * 4096
    check(facts['served_throughout'], 'era device lost a write')
    dmutil.dmsetup('remove ef')
    dmutil.dmsetup('remove ef-meta')
    facts['ok'] = True
    dmutil.report(facts)


if __name__ == '__main__':
    main()
