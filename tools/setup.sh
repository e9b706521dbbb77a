#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Install everything fcache needs on a fresh Debian 12 machine, build the
# agent and create the Python virtualenv in .venv.  Idempotent: a second
# run only checks.  Used by tools/run-demo.sh and tools/run-tests.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential pkg-config make
  libnbd-dev libnbd-bin python3-libnbd libjansson-dev libcmocka-dev
  nbdkit nbdkit-plugin-dev fio qemu-utils qemu-system-x86
  python3 python3-venv python3-pip python3-dev
  iproute2 procps
  user-mode-linux kmod libdevmapper-dev thin-provisioning-tools dmsetup
  libvirt-daemon-system python3-libvirt
  libgnutls28-dev gnutls-bin
  clang libclang-rt-14-dev
  linux-perf
)
# Operations checks (tools/run-tests.sh): the DevStack plugin and the
# systemd unit (shellcheck, bats, systemd-analyze, man for the unit's
# Documentation=), the architecture picture (graphviz).
APT_PACKAGES+=(shellcheck bats graphviz systemd man-db)
# The Debian packages (debian/control's Build-Depends beyond the above),
# built and unpacked by tests/packaging.
APT_PACKAGES+=(debhelper dh-python python3-all python3-setuptools python3-pbr
  python3-sphinx python3-oslo.config python3-keystoneauth1 python3-cliff
  python3-rich)
# Installed without their recommendations, which they need not here and
# which would bring a mail server (mdadm) and Ceph's manager and its Python
# stack (ceph-mon):
# a real Ceph cluster for the RBD origin tests (tools/ceph-box.sh: one
# mon, one OSD, no mgr), librbd to build against, its Python bindings;
# an md raid1 origin, built inside UML (tests/functional/test_uml_origins.py).
APT_PACKAGES_BARE=(ceph-mon ceph-osd ceph-common librbd-dev librados-dev
  python3-rbd python3-rados mdadm)
# The cloud in a box (tools/cloud.sh): its database and message broker
# (the box runs its own instances of them, never the system services), and
# busybox for the guest it builds (with a kernel fetched by apt-get
# download).
APT_PACKAGES_BARE+=(mariadb-server mariadb-client rabbitmq-server
  busybox-static)
# promtool, which checks and unit-tests the alert rules in etc/prometheus
# (tests/functional/test_metrics.py); Debian ships it with the server,
# whose service the tests never use.
APT_PACKAGES_BARE+=(prometheus)

missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
      grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${APT_PACKAGES[@]}")
mapfile -t missing_bare < <(missing_of "${APT_PACKAGES_BARE[@]}")
if ((${#missing[@]} + ${#missing_bare[@]})); then
  echo "setup: installing ${missing[*]} ${missing_bare[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  if ((${#missing[@]})); then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      "${missing[@]}" >/dev/null
  fi
  if ((${#missing_bare[@]})); then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends "${missing_bare[@]}" >/dev/null
  fi
fi

echo "setup: building fcache-agent"
make -s -C fcache_agent all

# Debian's python3 is used on purpose: python3-libnbd (the libnbd bindings
# the tests drive the agent with) exists only for it, hence
# --system-site-packages.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import nbd' 2>/dev/null; then
  echo "setup: creating .venv"
  rm -rf .venv
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
stamp=.venv/.fcache-reqs
want=$(cat requirements.txt test-requirements.txt setup.cfg | sha256sum)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python requirements"
  .venv/bin/pip install -q --upgrade pip >/dev/null
  # --ignore-installed: the venv sees Debian's site-packages (for
  # python3-libnbd), where the Debian package build's dependencies put an
  # older oslo.config and keystoneauth1; the tests run on the pinned ones,
  # with their console scripts (oslo-config-generator) in .venv/bin.
  .venv/bin/pip install -q --ignore-installed -r requirements.txt \
    -r test-requirements.txt
  .venv/bin/pip install -q -e .
  echo "$want" > "$stamp"
fi
# Documentation and release notes (Sphinx, reno), built by run-tests.sh.
doc_stamp=.venv/.fcache-doc-reqs
doc_want=$(sha256sum < doc/requirements.txt)
if [ ! -f "$doc_stamp" ] || [ "$(cat "$doc_stamp")" != "$doc_want" ]; then
  echo "setup: installing the documentation requirements"
  .venv/bin/pip install -q -r doc/requirements.txt
  echo "$doc_want" > "$doc_stamp"
fi
echo "setup: done"
