#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# /init of fcache-guest, the cloud box's guest (tools/cloudbox/guest.py):
# busybox and the virtio block driver in an initramfs, no root file
# system.  It writes FCACHE_MIB MiB of random data at 1 MiB into its first
# disk, the volume it boots from, and then reads them back, past its page
# cache, every few seconds for as long as it runs.  Every line it prints
# on the serial console (which Nova keeps: `openstack console log show`)
# starts with "fcache-guest:" and says what it saw:
#
#   fcache-guest: wrote MIB md5 SUM
#   fcache-guest: read SEQ md5 SUM ms MILLISECONDS
#
# The write goes first to a file in RAM, whose md5 is taken before the data
# reach the disk: a read's md5 is checked against data the disk never
# had a say in.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev \
    virtio_pci virtio_blk; do
  insmod /lib/modules/$m.ko 2>/dev/console || echo "fcache-guest: insmod $m failed" >/dev/console
done
mib=16
interval=3
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    fcache.mib=*) mib=${arg#fcache.mib=} ;;
    fcache.interval=*) interval=${arg#fcache.interval=} ;;
  esac
done
say() { echo "fcache-guest: $*" > /dev/console; }
n=0
while [ ! -b /dev/vda ]; do
  n=$((n + 1))
  [ $n -lt 100 ] || { say "no disk /dev/vda"; exec sleep 2147483647; }
  sleep 0.1
done
dd if=/dev/urandom of=/data bs=1M count="$mib" 2>/dev/null
sum=$(md5sum /data | cut -d' ' -f1)
if dd if=/data of=/dev/vda bs=1M seek=1 conv=fsync 2>/dev/null; then
  say "wrote $mib md5 $sum"
else
  say "write failed"
fi
rm -f /data
seq=0
while :; do
  seq=$((seq + 1))
  echo 3 > /proc/sys/vm/drop_caches
  t0=$(cut -d' ' -f1 /proc/uptime)
  got=$(dd if=/dev/vda bs=1M skip=1 count="$mib" 2>/dev/null | md5sum | cut -d' ' -f1)
  t1=$(cut -d' ' -f1 /proc/uptime)
  ms=$(echo "$t0 $t1" | awk '{ printf "%d", ($2 - $1) * 1000 }')
  say "read $seq md5 $got ms $ms"
  sleep "$interval"
done
