# SPDX-License-Identifier: Apache-2.0
"""Helpers for scripts that run inside the UML guest (python3, as root).

Block I/O uses O_DIRECT with page-aligned buffers so that what is checked
is what the device returned, not the guest's page cache.
"""

import json
import mmap
import os
import subprocess
import sys

SECTOR = 512


def sh(cmd, check=True):
    p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if check and p.returncode:
        raise RuntimeError('%s: rc %d: %s' % (cmd, p.returncode, p.stdout))
    return p


def dmsetup(args, check=True):
    return sh('dmsetup ' + args, check=check)


def blksize(dev):
    return int(sh('blockdev --getsize64 %s' % dev).stdout)


def _buf(n):
    return mmap.mmap(-1, n)


def pread(dev, off, n):
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        b = _buf(n)
        got = os.preadv(fd, [b], off)
        if got != n:
            raise IOError('short read %d of %d at %d on %s' % (got, n, off,
                                                               dev))
        return bytes(b)
    finally:
        os.close(fd)


def pwrite(dev, off, data, sync=True):
    fd = os.open(dev, os.O_WRONLY | os.O_DIRECT | (os.O_DSYNC if sync else 0))
    try:
        b = _buf(len(data))
        b[:] = data
        n = os.pwritev(fd, [b], off)
        if n != len(data):
            raise IOError('short write on %s' % dev)
    finally:
        os.close(fd)


def pattern(tag, n):
    """n bytes that name `tag` in every 16-byte slot."""
    unit = ('%-15s\n' % tag)[:16].encode()
    return (unit * (n // 16 + 1))[:n]


def cache_status(name):
    """dmsetup status of a cache target as a dict (kernel docs' layout)."""
    f = dmsetup('status ' + name).stdout.split()
    # <start> <len> cache <md bs> <used>/<total> <cbs> <used>/<total>
    # <rh> <rm> <wh> <wm> <demotions> <promotions> <dirty> ...
    used, total = f[6].split('/')
    return {'block_sectors': int(f[5]), 'used': int(used),
            'total': int(total), 'read_hits': int(f[7]),
            'read_misses': int(f[8]), 'write_hits': int(f[9]),
            'write_misses': int(f[10]), 'demotions': int(f[11]),
            'promotions': int(f[12]), 'dirty': int(f[13]),
            'raw': ' '.join(f)}


def report(obj):
    print('RESULT ' + json.dumps(obj, sort_keys=True))


class KdevProcess(object):
    """A test program that connects a /dev/nbdN, driven by its stdin.

    fcache_agent/tools' nbd_kdev and relay_kdev print ``DEVICE
    /dev/nbdN`` once connected, then answer each command line with one
    line.  ``check`` is the scenario's (checks()).
    """

    def __init__(self, argv, check):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  universal_newlines=True)
        line = self.p.stdout.readline().split()
        check(line[:1] == ['DEVICE'],
              '%s did not connect a device (rc %s)' % (
                  os.path.basename(argv[0]), self.p.poll()))
        self.dev = line[1]

    def cmd(self, c):
        self.p.stdin.write(c + '\n')
        self.p.stdin.flush()
        return self.p.stdout.readline().split()


def checks(facts):
    """fail(msg) and check(cond, msg) for a scenario reporting ``facts``.

    The first failure prints the RESULT line and ends the whole process
    (os._exit: from a scenario's helper thread too).
    """
    def fail(msg):
        facts['failed'] = msg
        report(facts)
        sys.stdout.flush()
        os._exit(1)

    def check(cond, msg):
        if not cond:
            fail(msg)
    return fail, check
