# SPDX-License-Identifier: Apache-2.0
"""fcache-guest: the cloud box's guest, built from Debian's packages.

Debian's cloud kernel (linux-image-cloud-amd64, fetched with ``apt-get
download``: no download from anywhere but the package archive) boots an
initramfs of busybox-static and the kernel's virtio modules whose /init
(guest_init.sh) is the whole workload.  Glance holds three images, as
for an AMI: the kernel (aki), the initramfs (ari), and ``fcache-guest``, a
small raw disk whose ``kernel_id`` and ``ramdisk_id`` name them; Cinder
copies the disk into a volume, the volume keeps the two properties, and
Nova boots the kernel directly with the volume as /dev/vda.
"""

import glob
import gzip
import hashlib
import io
import os
import shutil
import stat
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL_PACKAGE = 'linux-image-cloud-amd64'
BUSYBOX = '/bin/busybox'
MODULES = ('kernel/drivers/virtio/virtio.ko',
           'kernel/drivers/virtio/virtio_ring.ko',
           'kernel/drivers/virtio/virtio_pci_legacy_dev.ko',
           'kernel/drivers/virtio/virtio_pci_modern_dev.ko',
           'kernel/drivers/virtio/virtio_pci.ko',
           'kernel/drivers/block/virtio_blk.ko')
# Applets /init uses.
APPLETS = ('sh', 'mount', 'insmod', 'dd', 'md5sum', 'cut', 'cat', 'rm',
           'sleep', 'awk', 'echo')
DISK_MIB = 32


class GuestBuildError(Exception):
    pass


def _kernel_package():
    """The versioned package linux-image-cloud-amd64 depends on."""
    out = subprocess.run(['apt-cache', 'depends', KERNEL_PACKAGE],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith('Depends:'):
            return line.split()[1]
    raise GuestBuildError('apt-cache knows no dependency of %s: is the '
                          'Debian archive in the apt sources?'
                          % KERNEL_PACKAGE)


def _cpio_newc(entries):
    """A newc cpio archive of (name, mode, data or link target)."""
    out = io.BytesIO()

    def pad(n):
        out.write(b'\0' * ((4 - n % 4) % 4))

    for ino, (name, mode, data) in enumerate(
            list(entries) + [('TRAILER!!!', 0, b'')], start=1):
        name_b = name.encode() + b'\0'
        header = '070701' + ''.join('%08x' % v for v in (
            ino if name != 'TRAILER!!!' else 0, mode, 0, 0,
            2 if stat.S_ISDIR(mode) else 1, 0, len(data), 0, 0, 0, 0,
            len(name_b), 0))
        out.write(header.encode())
        out.write(name_b)
        pad(110 + len(name_b))
        out.write(data)
        pad(len(data))
    return out.getvalue()


def build(cache_dir):
    """Build (once) the kernel, initramfs and disk under ``cache_dir``.

    :returns: dict of paths: kernel, ramdisk, disk
    """
    out = {'kernel': os.path.join(cache_dir, 'fcache-guest.vmlinuz'),
           'ramdisk': os.path.join(cache_dir, 'fcache-guest.initrd'),
           'disk': os.path.join(cache_dir, 'fcache-guest.raw')}
    init = os.path.join(HERE, 'guest_init.sh')
    stamp = os.path.join(cache_dir, 'fcache-guest.stamp')
    with open(init, 'rb') as f:
        init_data = f.read()
    want = '%s\n%s\n' % (_kernel_package(),
                         hashlib.sha256(init_data).hexdigest())
    if all(os.path.exists(p) for p in out.values()) and \
            os.path.exists(stamp) and open(stamp).read() == want:
        return out
    os.makedirs(cache_dir, exist_ok=True)
    work = os.path.join(cache_dir, 'kernel')
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    pkg = _kernel_package()
    # apt's sandbox user cannot write here: it downloads as root, warning.
    subprocess.run(['apt-get', 'download', '-q', pkg], cwd=work, check=True,
                   capture_output=True)
    debs = glob.glob(os.path.join(work, '*.deb'))
    if len(debs) != 1:
        raise GuestBuildError('apt-get download %s gave %r' % (pkg, debs))
    root = os.path.join(work, 'x')
    subprocess.run(['dpkg-deb', '-x', debs[0], root], check=True)
    vmlinuz = glob.glob(os.path.join(root, 'boot', 'vmlinuz-*'))
    moddirs = glob.glob(os.path.join(root, 'lib', 'modules', '*'))
    if len(vmlinuz) != 1 or len(moddirs) != 1:
        raise GuestBuildError('%s holds no single kernel' % debs[0])

    entries = [(d, stat.S_IFDIR | 0o755, b'')
               for d in ('bin', 'dev', 'proc', 'sys', 'lib', 'lib/modules')]
    with open(BUSYBOX, 'rb') as f:
        entries.append(('bin/busybox', stat.S_IFREG | 0o755, f.read()))
    entries += [('bin/' + a, stat.S_IFLNK | 0o777, b'busybox')
                for a in APPLETS]
    for m in MODULES:
        with open(os.path.join(moddirs[0], m), 'rb') as f:
            entries.append(('lib/modules/' + os.path.basename(m),
                            stat.S_IFREG | 0o644, f.read()))
    entries.append(('init', stat.S_IFREG | 0o755, init_data))
    tmp = out['ramdisk'] + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(gzip.compress(_cpio_newc(entries), 6))
    os.replace(tmp, out['ramdisk'])
    shutil.copyfile(vmlinuz[0], out['kernel'])
    with open(out['disk'], 'wb') as f:
        f.truncate(DISK_MIB << 20)
    shutil.rmtree(work)
    with open(stamp, 'w') as f:
        f.write(want)
    return out
