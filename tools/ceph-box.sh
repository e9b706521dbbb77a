#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A throwaway single-node Ceph cluster for the tests and benchmarks: one
# mon and one bluestore OSD (its block device a sparse file), on loopback
# only, cephx on, everything (config, keyrings, stores, logs, sockets, pid
# files) inside one directory.  No mgr: a mon and an OSD serve RBD I/O,
# health warnings aside.  Several boxes in different directories run at
# once (each mon on a free port, the OSDs on ports of Ceph's range).
#
#   ceph-box.sh start DIR [SIZE]   create DIR, start the cluster (SIZE of
#                                  the OSD's block file, default 4G), wait
#                                  until an RBD image can be created
#   ceph-box.sh stop DIR           stop the daemons (idempotent)
#   ceph-box.sh kill-osd DIR       SIGKILL the OSD (an origin that dies)
#                                  and have the mon mark it down
#   ceph-box.sh start-osd DIR      start it again on the same store, wait
#                                  until it serves I/O
#   ceph-box.sh env DIR            CEPH_CONF=..., CEPH_KEYRING_CINDER=...,
#                                  CEPH_MON_HOST=127.0.0.1:PORT, for eval
#
# The pool is "volumes" (size 1), its client "client.cinder" (caps
# "profile rbd" on it), the keyrings DIR/ceph.client.{admin,cinder}.keyring.
# Needs root only to read /proc of the daemons; touches neither /etc/ceph
# nor /var/lib/ceph.  Prints nothing but errors.
#
# CEPH_BOX_ADDR (default 127.0.0.1): the address the daemons bind, for a
# box whose clients live in other network namespaces (tools/cloud.sh).
# CEPH_BOX_STANDARD_PORTS=1: the mon listens as a production one does, on
# msgr2's 3300 and msgr1's 6789, and mon_host names no port: Cinder's RBD
# driver hands its clients "mon dump"'s legacy (msgr1) address.  Only for
# an address of the box's own (two boxes would clash on the ports).
set -euo pipefail

ADDR=${CEPH_BOX_ADDR:-127.0.0.1}
[[ "$ADDR" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  { echo "ceph-box: CEPH_BOX_ADDR=$ADDR is not an IPv4 address" >&2; exit 2; }

MON_ID=a
OSD_ID=0
POOL=volumes
# Bounds of the waits, in seconds.
MON_WAIT=20
OSD_WAIT=40
STOP_WAIT=15

die() {
  echo "ceph-box: $*" >&2
  exit 1
}

# die_log MESSAGE LOG: die, showing the end of LOG.
die_log() {
  {
    echo "ceph-box: $1"
    if [ -s "$2" ]; then
      echo "ceph-box: last lines of $2:"
      grep -v '^[[:space:]]*$' "$2" | tail -n 25 | sed 's/^/  /'
    fi
  } >&2
  exit 1
}

usage() {
  echo "usage: $0 start DIR [SIZE] | stop DIR | kill-osd DIR | start-osd DIR | env DIR" >&2
  exit 2
}

# Absolute path of an existing directory.
absdir() {
  [ -d "$1" ] || die "$1: no such directory"
  (cd "$1" && pwd)
}

need_box() {
  [ -f "$dir/ceph.conf" ] || die "$dir holds no ceph box (no ceph.conf)"
}

# pid_of NAME: the pid in NAME's pid file if that process is a running
# ceph daemon (not a recycled pid), else nothing.
pid_of() {
  local f="$dir/run/$1.pid" pid comm
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null) || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 0
  alive "$pid" || return 0
  case "$comm" in
    ceph-mon|ceph-osd) echo "$pid" ;;
  esac
}

# alive PID: PID is a process that has not exited (a daemon's parent is
# init, which may take its time to reap it: a zombie counts as gone).
alive() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# wait_gone PID SECONDS: wait until PID has exited; false if it has not.
wait_gone() {
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    alive "$1" || return 0
    sleep 0.05
  done
  ! alive "$1"
}

# stop_daemon NAME SIGNAL: send SIGNAL, wait for the process to exit.
stop_daemon() {
  local name=$1 sig=$2 pid
  pid=$(pid_of "$name")
  if [ -n "$pid" ]; then
    kill "-$sig" "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$STOP_WAIT"; then
      echo "ceph-box: $name (pid $pid) did not exit in ${STOP_WAIT}s, killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 5 || die "$name (pid $pid) survives SIGKILL"
    fi
  fi
  rm -f "$dir/run/$name.pid"
}

# admin COMMAND...: run a ceph or rbd command as client.admin.
admin() {
  CEPH_ARGS="--conf $dir/ceph.conf --id admin" "$@"
}

# Create and remove an image as client.cinder: the cluster serves I/O.
# Each try is bounded by the client's own operation timeouts.
probe() {
  local name="probe-$$"
  timeout 15 rbd -c "$dir/ceph.conf" --id cinder \
    --rados-osd-op-timeout 3 --rados-mon-op-timeout 3 \
    create --size 1M "$POOL/$name" 2>>"$dir/log/probe.log" &&
    timeout 15 rbd -c "$dir/ceph.conf" --id cinder \
      --rados-osd-op-timeout 3 --rados-mon-op-timeout 3 \
      rm --no-progress "$POOL/$name" 2>>"$dir/log/probe.log"
}

# Wait until the OSD is up in the mon's map (it says "active" once it has
# seen itself up), then until the cluster serves I/O.  A client given the
# map from before an OSD's restart would wait for the dead incarnation.
wait_io() {
  local deadline=$((SECONDS + OSD_WAIT)) osd_log="$dir/log/osd.$OSD_ID.log"
  until ceph --admin-daemon "$dir/run/osd.$OSD_ID.asok" status 2>/dev/null |
      grep -q '"state": "active"'; do
    [ -n "$(pid_of "osd.$OSD_ID")" ] || die_log "the OSD exited" "$osd_log"
    ((SECONDS < deadline)) ||
      die_log "the OSD is not up after ${OSD_WAIT}s" "$osd_log"
    sleep 0.1
  done
  until probe; do
    [ -n "$(pid_of "osd.$OSD_ID")" ] || die_log "the OSD exited" "$osd_log"
    ((SECONDS < deadline)) ||
      die_log "the cluster in $dir serves no I/O after ${OSD_WAIT}s (see also $dir/log/probe.log)" \
        "$osd_log"
    sleep 0.2
  done
}

start_osd_daemon() {
  ceph-osd -c "$dir/ceph.conf" -i "$OSD_ID" 2>>"$dir/log/osd.$OSD_ID.log" ||
    die_log "ceph-osd failed to start" "$dir/log/osd.$OSD_ID.log"
}

write_conf() {
  local fsid=$1 port=$2 size=$3 mon_host msgr1
  if [ "${CEPH_BOX_STANDARD_PORTS:-0}" = 1 ]; then
    mon_host=$ADDR msgr1=true
  else
    mon_host=$ADDR:$port msgr1=false
  fi
  cat >"$dir/ceph.conf" <<EOF
# A ceph box (tools/ceph-box.sh): one mon, one OSD, one address, cephx.
[global]
fsid = $fsid
mon_host = $mon_host
public_addr = $ADDR
cluster_addr = $ADDR
ms_bind_msgr1 = $msgr1
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
run_dir = $dir/run
crash_dir = $dir/crash
admin_socket = \$run_dir/\$name.asok
mon_cluster_log_file = $dir/log/cluster.log
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
auth_allow_insecure_global_id_reclaim = false
# A mon stops when its disk is nearly full (5% by default): not this one.
mon_data_avail_warn = 2
mon_data_avail_crit = 1
osd_crush_chooseleaf_type = 0

[client]
keyring = $dir/ceph.\$name.keyring

[mon]
mon_data = $dir/mon.\$id
# A daemon's core dump lands in DIR, not in the caller's directory.
chdir = $dir
log_file = $dir/log/\$name.log
pid_file = $dir/run/\$name.pid
# Commit changes (the OSD's boot, the pool) at once, not after 1 s.
paxos_propose_interval = 0.05
mon_rocksdb_options = write_buffer_size=8388608,compression=kNoCompression

[osd]
osd_data = $dir/osd.\$id
chdir = $dir
log_file = $dir/log/\$name.log
pid_file = $dir/run/\$name.pid
osd_objectstore = bluestore
bluestore_block_path = $dir/osd.\$id.block
bluestore_block_size = $size
bluestore_block_create = true
bluestore_fsck_on_mkfs = false
# A client that died without closing (an agent killed) loses its watches,
# and so its image's exclusive lock, after 5 s instead of 30 s: the tests
# that kill one wait for that.
osd_client_watch_timeout = 5
# Small memory: a fixed 64 MiB cache, small rocksdb memtables, few threads.
bluestore_cache_autotune = false
bluestore_cache_size = 67108864
osd_memory_target = 536870912
bluestore_rocksdb_options = compression=kNoCompression,max_write_buffer_number=2,min_write_buffer_number_to_merge=1,recycle_log_file_num=2,write_buffer_size=16777216,writable_file_max_buffer_size=0,compaction_readahead_size=2097152
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1
EOF
}

# A key in Ceph's base64 form.
genkey() {
  ceph-authtool --gen-print-key
}

# A start that fails stops what it started; DIR stays, with the logs.
stop_failed_start() {
  if [ -n "$starting" ]; then
    local pid
    for pid in "${bg_pids[@]}"; do
      kill "$pid" 2>/dev/null || true
    done
    stop_daemon "osd.$OSD_ID" KILL
    stop_daemon "mon.$MON_ID" KILL
  fi
}

cmd_start() {
  { [ $# -ge 1 ] && [ $# -le 2 ]; } || usage
  local size=${2:-4G}
  mkdir -p "$1"
  dir=$(absdir "$1")
  [ ! -e "$dir/ceph.conf" ] || die "$dir already holds a ceph box"
  starting=1
  trap stop_failed_start EXIT
  size=$(numfmt --from=iec "$size" 2>/dev/null) || die "bad size: $2"
  ((size >= 1 << 30)) || die "the OSD needs at least 1G"
  mkdir -p "$dir/run" "$dir/log" "$dir/crash" "$dir/mon.$MON_ID" "$dir/osd.$OSD_ID"

  local fsid osd_uuid port
  fsid=$(cat /proc/sys/kernel/random/uuid)
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  # A port the kernel calls free now; the mon binds it a moment later.
  local addrv
  if [ "${CEPH_BOX_STANDARD_PORTS:-0}" = 1 ]; then
    port=3300
    addrv="[v2:$ADDR:3300,v1:$ADDR:6789]"
  else
    port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("'"$ADDR"'", 0)); print(s.getsockname()[1])')
    addrv="[v2:$ADDR:$port]"
  fi
  write_conf "$fsid" "$port" "$size"

  # Every key is in the mon's initial keyring, which its mkfs imports: no
  # "auth add" round trip later.
  local k_mon k_admin k_osd k_cinder
  k_mon=$(genkey); k_admin=$(genkey); k_osd=$(genkey); k_cinder=$(genkey)
  cat >"$dir/ceph.client.admin.keyring" <<EOF
[client.admin]
	key = $k_admin
EOF
  cat >"$dir/ceph.client.cinder.keyring" <<EOF
[client.cinder]
	key = $k_cinder
EOF
  cat >"$dir/osd.$OSD_ID/keyring" <<EOF
[osd.$OSD_ID]
	key = $k_osd
EOF
  cat >"$dir/mon.keyring" <<EOF
[mon.]
	key = $k_mon
	caps mon = "allow *"
[client.admin]
	key = $k_admin
	caps mon = "allow *"
	caps osd = "allow *"
	caps mgr = "allow *"
[osd.$OSD_ID]
	key = $k_osd
	caps mon = "allow profile osd"
	caps mgr = "allow profile osd"
	caps osd = "allow *"
[client.cinder]
	key = $k_cinder
	caps mon = "profile rbd"
	caps osd = "profile rbd pool=$POOL"
EOF
  chmod 600 "$dir"/*.keyring "$dir/osd.$OSD_ID/keyring"

  # The OSD's store is made (it needs no mon) while the mon starts.
  ceph-osd -c "$dir/ceph.conf" -i "$OSD_ID" --mkfs --osd-uuid "$osd_uuid" \
    --no-mon-config >"$dir/log/osd-mkfs.log" 2>&1 &
  local mkfs_pid=$!
  bg_pids+=("$mkfs_pid")

  monmaptool --create --fsid "$fsid" --addv "$MON_ID" "$addrv" \
    "$dir/monmap" >/dev/null 2>"$dir/log/monmaptool.log" ||
    die_log "monmaptool failed" "$dir/log/monmaptool.log"
  ceph-mon -c "$dir/ceph.conf" -i "$MON_ID" --mkfs --monmap "$dir/monmap" \
    --keyring "$dir/mon.keyring" >"$dir/log/mon-mkfs.log" 2>&1 ||
    die_log "ceph-mon --mkfs failed" "$dir/log/mon-mkfs.log"
  ceph-mon -c "$dir/ceph.conf" -i "$MON_ID" 2>>"$dir/log/mon.$MON_ID.log" ||
    die_log "ceph-mon failed to start" "$dir/log/mon.$MON_ID.log"

  # The first mon command waits for the mon to listen and form a quorum.
  admin timeout "$((MON_WAIT + 5))" ceph --connect-timeout "$MON_WAIT" \
    osd new "$osd_uuid" "$OSD_ID" >/dev/null 2>"$dir/log/ceph-cli.log" ||
    die_log "the mon does not answer (ceph osd new failed: $(tail -n 3 "$dir/log/ceph-cli.log"))" \
      "$dir/log/mon.$MON_ID.log"

  # The pool is created while the OSD starts.
  CEPH_ARGS="--conf $dir/ceph.conf --id admin" timeout "$MON_WAIT" \
    ceph osd pool create "$POOL" >/dev/null 2>>"$dir/log/ceph-cli.log" &
  local pool_pid=$!
  bg_pids+=("$pool_pid")
  wait "$mkfs_pid" ||
    die_log "ceph-osd --mkfs failed" "$dir/log/osd-mkfs.log"
  start_osd_daemon
  wait "$pool_pid" ||
    die_log "creating pool $POOL failed" "$dir/log/ceph-cli.log"
  # rbd pool init also writes an object: it waits for the OSD's boot.
  admin timeout "$OSD_WAIT" rbd pool init "$POOL" 2>>"$dir/log/ceph-cli.log" ||
    die_log "rbd pool init $POOL failed or timed out (${OSD_WAIT}s)" \
      "$dir/log/osd.$OSD_ID.log"
  wait_io
  starting=
}

cmd_stop() {
  [ $# -eq 1 ] || usage
  [ -d "$1" ] || return 0
  dir=$(absdir "$1")
  stop_daemon "osd.$OSD_ID" TERM
  stop_daemon "mon.$MON_ID" TERM
}

cmd_kill_osd() {
  [ $# -eq 1 ] || usage
  dir=$(absdir "$1")
  need_box
  [ -n "$(pid_of "osd.$OSD_ID")" ] || die "the OSD of $dir is not running"
  stop_daemon "osd.$OSD_ID" KILL
  # In a cluster of several OSDs the peers of a dead one have the mon mark
  # it down within seconds; this one has none.  A client whose map still
  # says up keeps sending to the dead address: it asks the mon for a new
  # map only once an operation is older than objecter_timeout (10 s), and
  # never if its operations time out sooner (rados_osd_op_timeout).
  admin timeout "$MON_WAIT" ceph osd down "$OSD_ID" >/dev/null \
    2>>"$dir/log/ceph-cli.log" ||
    die_log "the mon does not mark osd.$OSD_ID down" "$dir/log/ceph-cli.log"
}

cmd_start_osd() {
  [ $# -eq 1 ] || usage
  dir=$(absdir "$1")
  need_box
  [ -n "$(pid_of "mon.$MON_ID")" ] || die "the mon of $dir is not running"
  [ -z "$(pid_of "osd.$OSD_ID")" ] || die "the OSD of $dir is already running"
  start_osd_daemon
  wait_io
}

cmd_env() {
  [ $# -eq 1 ] || usage
  dir=$(absdir "$1")
  need_box
  local host
  host=$(sed -n 's/^mon_host = //p' "$dir/ceph.conf")
  printf 'CEPH_CONF=%q\n' "$dir/ceph.conf"
  printf 'CEPH_KEYRING_CINDER=%q\n' "$dir/ceph.client.cinder.keyring"
  printf 'CEPH_KEYRING_ADMIN=%q\n' "$dir/ceph.client.admin.keyring"
  printf 'CEPH_MON_HOST=%q\n' "$host"
  printf 'CEPH_POOL=%q\n' "$POOL"
}

dir=
starting=
bg_pids=()
[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  kill-osd) cmd_kill_osd "$@" ;;
  start-osd) cmd_start_osd "$@" ;;
  env) cmd_env "$@" ;;
  *) usage ;;
esac
