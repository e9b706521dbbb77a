#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# etc/systemd/fcache-agent.service and its dmcache drop-in.
#
# systemd is not PID 1 here, so the unit cannot be started: systemd-analyze
# checks it offline (verify, security with a ceiling on the exposure
# score), and the agent is run by hand with the identity the unit gives it
# (an unprivileged user in group disk, no capability, no_new_privs, umask
# 077) to show that engine = ucache really needs nothing more.  Needs root.

REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
UNIT=$REPO/etc/systemd/fcache-agent.service
DROPIN=$REPO/etc/systemd/fcache-agent.service.d/dmcache.conf
METRICS_DROPIN=$REPO/etc/systemd/fcache-agent.service.d/metrics.conf
AGENT=$REPO/fcache_agent/build/fcache-agent
# Exposure ceilings (systemd-analyze security, 0 best .. 10 worst).
UCACHE_MAX=2.0
DMCACHE_MAX=3.0

setup() {
    [[ -x "$AGENT" ]] || {
        echo "no $AGENT: run tools/setup.sh first" >&2
        return 1
    }
    T=$BATS_TEST_TMPDIR
}

teardown() {
    if [[ -f "$T/agent.pid" ]]; then
        kill "$(cat "$T/agent.pid")" 2>/dev/null || true
    fi
    if [[ -n "${D:-}" ]]; then
        rm -rf "$D"
    fi
}

# unit_file [dmcache] - the unit as installed, with the drop-in applied
# (a drop-in's [Service] lines act as if appended to the unit) and
# ExecStart on the agent built here
unit_file() {
    local out=$T/fcache-agent.service
    sed "s|/usr/local/bin/fcache-agent|$AGENT|" "$UNIT" >"$out"
    if [[ "${1:-}" == dmcache ]]; then
        sed -n '/^\[Service\]/,$p' "$DROPIN" >>"$out"
    fi
    if [[ "${1:-}" == metrics ]]; then
        sed -n '/^\[Service\]/,$p' "$METRICS_DROPIN" >>"$out"
    fi
    echo "$out"
}

# man_path - where the man pages of Documentation= are (built by Sphinx)
man_path() {
    local dir=$REPO/build/doc/man
    if [[ ! -f "$dir/man8/fcache-agent.8" ]]; then
        "$REPO/.venv/bin/sphinx-build" -q -b man "$REPO/doc" "$dir" >&2
    fi
    echo "$dir"
}

# exposure FILE - the overall exposure score
exposure() {
    systemd-analyze security --offline=true "$1" |
        sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p'
}

# agent_knows KEY - whether the built agent accepts KEY (it lists the keys
# it knows when refusing one)
agent_knows() {
    printf '[agent]\nno_such_key = 1\n' >"$T/probe.conf"
    "$AGENT" --config "$T/probe.conf" 2>&1 | grep -q "known keys: .*\b$1\b"
}

unit_value() {
    sed -n "s/^$1=//p" "$UNIT"
}

@test "systemd-analyze verify: the unit, and the unit with each drop-in" {
    MANPATH=$(man_path)
    export MANPATH
    run systemd-analyze verify "$(unit_file)"
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    [ -z "$output" ] || { echo "$output"; false; }
    run systemd-analyze verify "$(unit_file dmcache)"
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    [ -z "$output" ] || { echo "$output"; false; }
    run systemd-analyze verify "$(unit_file metrics)"
    [ "$status" -eq 0 ] || { echo "$output"; false; }
    [ -z "$output" ] || { echo "$output"; false; }
}

@test "systemd-analyze security: the metrics drop-in keeps ucache at most $UCACHE_MAX" {
    f=$(unit_file metrics)
    score=$(exposure "$f")
    echo "# systemd-analyze security, ucache with metrics: $score" >&3
    systemd-analyze security --offline=true \
        --threshold="$(awk -v m=$UCACHE_MAX 'BEGIN {print m * 10}')" "$f" >/dev/null
}

@test "systemd-analyze security: ucache exposure at most $UCACHE_MAX" {
    f=$(unit_file)
    score=$(exposure "$f")
    echo "# systemd-analyze security, engine = ucache: $score" >&3
    systemd-analyze security --offline=true \
        --threshold="$(awk -v m=$UCACHE_MAX 'BEGIN {print m * 10}')" "$f" >/dev/null
}

@test "systemd-analyze security: dmcache exposure at most $DMCACHE_MAX" {
    f=$(unit_file dmcache)
    score=$(exposure "$f")
    echo "# systemd-analyze security, engine = dmcache: $score" >&3
    systemd-analyze security --offline=true \
        --threshold="$(awk -v m=$DMCACHE_MAX 'BEGIN {print m * 10}')" "$f" >/dev/null
}

@test "the unit: no capability, a dynamic user in group disk, restarts on failure, Type=notify with a watchdog" {
    [ "$(unit_value DynamicUser)" = yes ]
    [ "$(unit_value SupplementaryGroups)" = disk ]
    [ "$(unit_value CapabilityBoundingSet)" = "" ]
    [ "$(unit_value NoNewPrivileges)" = yes ]
    [ "$(unit_value Restart)" = on-failure ]
    # The agent says READY=1 once its control socket listens and feeds the
    # watchdog (tests/functional/test_systemd_notify.py).
    [ "$(unit_value Type)" = notify ]
    [ "$(unit_value NotifyAccess)" = main ]
    [ -n "$(unit_value WatchdogSec)" ]
    [ "$(unit_value ProtectSystem)" = strict ]
    # The drop-in gives dmcache root and only what device-mapper needs.
    grep -qx 'User=root' "$DROPIN"
    grep -qx 'CapabilityBoundingSet=CAP_SYS_ADMIN CAP_MKNOD CAP_CHOWN' "$DROPIN"
}

@test "ucache serves a volume as the unit's identity: unprivileged, group disk, no capability" {
    [ "$(unit_value UMask)" = 0077 ]
    # What DynamicUser= would pick: a UID from its range, no such user.
    uid=$((61184 + RANDOM % 1000))
    # Directories other users can enter (bats' own are 0700).
    D=$(mktemp -d /tmp/fcache-unit.XXXXXX)
    chmod 0755 "$D"
    # RuntimeDirectory= and StateDirectory=, owned by the service's user.
    install -d -m 0755 -o "$uid" -g "$uid" "$D/run"
    install -d -m 0700 -o "$uid" -g "$uid" "$D/state"
    # An origin as os-brick leaves it: root:disk 0660.
    head -c $((4 << 20)) /dev/urandom >"$D/origin.img"
    chown root:disk "$D/origin.img"
    chmod 0660 "$D/origin.img"
    cp "$D/origin.img" "$D/private.img"
    chmod 0600 "$D/private.img"
    cat >"$D/agent.conf" <<EOF
[agent]
control_socket = $D/run/agent.sock
state_dir = $D/state
cache_size = 16M
export_dir = $D/run/exports
migration_listen = 127.0.0.1:$((20000 + RANDOM % 20000))
EOF
    # Agents that confine origins to configured directories.
    if agent_knows origin_prefixes; then
        echo "origin_prefixes = $D/" >>"$D/agent.conf"
    fi
    # The metrics drop-in's setup: node-exporter's directory, writable by
    # a group the agent is in (a GID no group has stands for
    # fcache-metrics), root's otherwise.
    mgid=$((uid + 1000))
    install -d -m 2775 -o root -g "$mgid" "$D/textfile"
    echo "metrics_path = $D/textfile/fcache.prom" >>"$D/agent.conf"
    echo "metrics_interval = 1" >>"$D/agent.conf"
    groups="$(unit_value SupplementaryGroups) $mgid"
    # shellcheck disable=SC2016 # the inner shell expands its arguments
    setpriv --reuid="$uid" --regid="$uid" --groups="${groups// /,}" \
        --bounding-set=-all --inh-caps=-all --no-new-privs -- \
        sh -c 'umask 077; exec "$0" --config "$1"' "$AGENT" "$D/agent.conf" \
        >"$T/agent.log" 2>&1 &
    echo $! >"$T/agent.pid"
    for _ in $(seq 100); do
        [[ -S "$D/run/agent.sock" ]] && break
        sleep 0.1
    done
    [ -S "$D/run/agent.sock" ] || { cat "$T/agent.log"; false; }
    [ "$(stat -c %u "$D/run/agent.sock")" -eq "$uid" ]

    cli=("$REPO/.venv/bin/fcache" --socket "$D/run/agent.sock")
    uri=$("${cli[@]}" volume-attach vol-1 --origin "$D/origin.img" \
        --cache-size 8M --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["export_uri"])')
    nbdcopy "$uri" "$D/read.img"
    cmp "$D/origin.img" "$D/read.img"
    nbdcopy "$uri" "$D/read2.img"
    cmp "$D/origin.img" "$D/read2.img"
    hits=$("${cli[@]}" volume-show vol-1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["read_hits"])')
    [ "$hits" -gt 0 ]

    # The metrics file node-exporter reads: there, readable by others
    # despite the unit's umask, counting the hits.
    for _ in $(seq 50); do
        grep -q "fcache_volume_cache_hits_total{volume=\"vol-1\"} $hits" \
            "$D/textfile/fcache.prom" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "fcache_volume_cache_hits_total{volume=\"vol-1\"} $hits" \
        "$D/textfile/fcache.prom" || { cat "$D/textfile/fcache.prom"; false; }
    [ "$(stat -c %a "$D/textfile/fcache.prom")" = 644 ]

    # What the group does not grant, the agent cannot open: it is not root.
    run "${cli[@]}" volume-attach vol-2 --origin "$D/private.img" --cache-size 4M
    [ "$status" -ne 0 ]
    [[ "$output" == *"ermission denied"* ]]
}
