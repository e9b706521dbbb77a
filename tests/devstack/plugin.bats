#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The DevStack plugin (devstack/), phase by phase.
#
# DevStack cannot run here (it clones from the internet): these tests
# source the real plugin against stand-ins for DevStack's own functions
# (tests/devstack/standins.bash) and check what each phase would install,
# configure and start.  The agent build, the loop device and the agent
# itself are real: post-config starts fcache-agent with the configuration
# the plugin wrote and the tests ask it, through the fcache CLI, what it
# serves.  Needs root (losetup), like tools/run-tests.sh.

# The tests set FCACHE_* variables as local.conf would, for the sourced
# plugin to read: shellcheck cannot see those reads.
# shellcheck disable=SC2034,SC2153

load standins

setup() {
    setup_standins
    FCACHE_CLI=$REPO/.venv/bin/fcache
    [[ -x "$FCACHE_CLI" ]] || {
        echo "no $FCACHE_CLI: run tools/setup.sh first" >&2
        return 1
    }
}

teardown() {
    teardown_standins
}

# refute COMMAND... - fail if the command succeeds (bats ignores "! cmd"
# anywhere but on a test's last line)
refute() {
    if "$@"; then
        echo "unexpectedly succeeded: $*" >&2
        return 1
    fi
}

# calls PATTERN - the recorded calls matching an extended regex
calls() {
    grep -E -- "$1" "$CALLS"
}

conf_value() {
    sed -n "s/^$1 = //p" "$FCACHE_CONF_DIR/agent.conf"
}

agent_status() {
    "$FCACHE_CLI" --socket "$FCACHE_RUN_DIR/agent.sock" agent-status --json
}

json() {
    python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

@test "settings: defaults enable the agent with ucache, 4K blocks and a loop device" {
    load_settings
    is_service_enabled fcache-agent
    [ "$FCACHE_ENGINE" = ucache ]
    [ "$FCACHE_BLOCK_SIZE" = 4K ]
    [ -z "$FCACHE_CACHE_DEVICE" ]
    [ "$FCACHE_CACHE_FILE" = "$DATA_DIR/fcache/cache-backing.img" ]
    [ "$FCACHE_CONTROL_SOCKET" = "$FCACHE_RUN_DIR/agent.sock" ]
    [ "$FCACHE_MIGRATION_LISTEN" != "" ]
    [ "$FCACHE_VOLUME_TYPE_STRATEGIES" = "none cachemior firepan firepan_if cloudcache hybrid auto" ]
}

@test "settings: local.conf overrides win; dmcache gets 32K blocks" {
    FCACHE_ENGINE=dmcache FCACHE_CACHE_DEVICE=/dev/nvme0n1p3
    load_settings
    [ "$FCACHE_ENGINE" = dmcache ]
    [ "$FCACHE_BLOCK_SIZE" = 32K ]
    [ "$FCACHE_CACHE_DEVICE" = /dev/nvme0n1p3 ]
}

@test "pre-install: the agent's build dependencies, no dm tools for ucache" {
    load_settings
    plugin stack pre-install
    calls '^install_package .*libnbd-dev' | grep -q libjansson-dev
    calls '^install_package .*libdevmapper-dev'
    refute calls 'thin-provisioning-tools'
}

@test "pre-install: the Debian package of every library the agent's Makefile links" {
    load_settings
    plugin stack pre-install
    libs=$(sed -n 's/^PKGS := //p' "$REPO/fcache_agent/Makefile")
    [ -n "$libs" ]
    for lib in $libs; do
        # The package that ships the library's pkg-config file.
        pc="$(pkg-config --variable=pcfiledir "$lib")/$lib.pc"
        deb=$(dpkg -S "$pc" | cut -d: -f1)
        [ -n "$deb" ]
        calls "^install_package .* $deb( |\$)"
    done
}

@test "pre-install: dmcache also gets thin-provisioning-tools and dmsetup" {
    FCACHE_ENGINE=dmcache
    load_settings
    plugin stack pre-install
    calls '^install_package thin-provisioning-tools dmsetup$'
}

@test "pre-install: an unknown engine stops stack.sh with a clear error" {
    FCACHE_ENGINE=bcache
    load_settings
    run plugin stack pre-install
    [ "$status" -ne 0 ]
    [[ "$output" == *"FCACHE_ENGINE=bcache: use ucache or dmcache"* ]]
    refute calls '^install_package'
}

@test "pre-install: a cache device that is not a block device is refused" {
    FCACHE_CACHE_DEVICE=$T/not-a-device
    load_settings
    touch "$T/not-a-device"
    run plugin stack pre-install
    [ "$status" -ne 0 ]
    [[ "$output" == *"FCACHE_CACHE_DEVICE=$T/not-a-device is not a block device"* ]]
}

@test "pre-install: an unknown strategy in a list is refused" {
    FCACHE_TEMPEST_STRATEGIES="hybrid warp"
    load_settings
    run plugin stack pre-install
    [ "$status" -ne 0 ]
    [[ "$output" == *"FCACHE_TEMPEST_STRATEGIES: unknown strategy 'warp'"* ]]
}

@test "install: builds and installs the agent, installs the package for Nova" {
    load_settings
    plugin stack install
    [ -x "$FCACHE_AGENT_BIN" ]
    run "$FCACHE_AGENT_BIN" --version
    [ "$output" = "$("$REPO/tools/version.sh")" ]
    # A regular install: nova/virt/fcache must land in Nova's package.
    calls "^pip_install $REPO\$"
    refute calls '^setup_develop'
}

@test "install: without the Nova driver, an editable install" {
    FCACHE_NOVA_DRIVER=False
    load_settings
    plugin stack install
    calls "^setup_develop $REPO\$"
    refute calls '^pip_install'
}

@test "post-config: loop device, agent.conf, nova.conf, cinder.conf; the real agent serves it" {
    load_settings
    plugin stack install
    plugin stack post-config

    # The host cache: a loop device over a sparse file of FCACHE_CACHE_SIZE.
    dev=$(conf_value cache_path)
    [ -b "$dev" ]
    losetup -nO BACK-FILE "$dev" | grep -qx "$FCACHE_CACHE_FILE"
    [ "$(stat -c %s "$FCACHE_CACHE_FILE")" -eq $((64 << 20)) ]

    [ "$(conf_value engine)" = ucache ]
    [ "$(conf_value control_socket)" = "$FCACHE_RUN_DIR/agent.sock" ]
    [ "$(conf_value control_group)" = root ]
    [ "$(conf_value control_admin_group)" = root ]
    [ "$(conf_value origin_prefixes)" = "/dev/disk/by-path/,/dev/disk/by-id/,/dev/mapper/,/dev/rbd,$DATA_DIR/nova/mnt/" ]
    [ "$(conf_value export_group)" != "" ]
    [ "$(stat -c %a "$FCACHE_STATE_DIR")" = 700 ]

    calls "^run_process fcache-agent \[$FCACHE_AGENT_BIN --config $FCACHE_CONF_DIR/agent.conf\] group= user=root$"
    calls "^iniset $NOVA_CONF DEFAULT compute_driver fcache.FcacheLibvirtDriver$"
    calls "^iniset $NOVA_CONF fcache agent_socket $FCACHE_RUN_DIR/agent.sock$"
    calls "^iniset $NOVA_CONF fcache default_strategy auto$"
    calls "^iniset $NOVA_CONF notifications notification_format both$"
    calls "^iniset $CINDER_CONF DEFAULT osapi_volume_extension cinder.api.contrib.standard_extensions$"
    calls "^iniadd $CINDER_CONF DEFAULT osapi_volume_extension cinder_ext.api.Fcache_volume_policy$"

    # The real agent took the configuration and serves the loop device.
    status_json=$(agent_status)
    [ "$(json engine <<<"$status_json")" = ucache ]
    [ "$(json capacity_bytes <<<"$status_json")" -eq $((64 << 20)) ]
}

@test "post-config: a configured device is the cache; no loop device, no file" {
    truncate -s 64M "$T/flash.img"
    flash=$(losetup --find --show "$T/flash.img")
    FCACHE_CACHE_DEVICE=$flash
    load_settings
    plugin stack install
    plugin stack post-config
    [ "$(conf_value cache_path)" = "$flash" ]
    [ ! -e "$FCACHE_CACHE_FILE" ]
    [ "$(json capacity_bytes <<<"$(agent_status)")" -eq $((64 << 20)) ]
}

@test "post-config: without n-cpu and c-api, neither nova.conf nor cinder.conf is touched" {
    ENABLED_SERVICES=tempest
    load_settings
    plugin stack install
    plugin stack post-config
    refute calls "^ini(set|add) ($NOVA_CONF|$CINDER_CONF) "
    [ -S "$FCACHE_RUN_DIR/agent.sock" ]
}

@test "post-config: without the Nova driver, nova keeps its compute_driver" {
    FCACHE_NOVA_DRIVER=False
    load_settings
    plugin stack install
    plugin stack post-config
    calls "^iniset $NOVA_CONF fcache agent_socket "
    refute calls "compute_driver"
}

@test "post-config: an agent that does not start fails the phase, pointing at its log" {
    FCACHE_CACHE_SIZE=1000 FCACHE_START_TIMEOUT=3
    load_settings
    plugin stack install
    run plugin stack post-config
    [ "$status" -ne 0 ]
    [[ "$output" == *"fcache-agent did not create $FCACHE_RUN_DIR/agent.sock; see journalctl -u devstack@fcache-agent"* ]]
    # The real agent said why.
    grep -q "cache_size" "$T/agent.log"
}

@test "unstack then stack again: the agent stops, the same loop device comes back warm" {
    load_settings
    plugin stack install
    plugin stack post-config
    dev=$(conf_value cache_path)
    pid=$(cat "$T/agent.pid")
    plugin unstack
    calls '^stop_process fcache-agent$'
    refute kill -0 "$pid" 2>/dev/null
    [ -f "$FCACHE_CACHE_FILE" ]
    plugin stack post-config
    [ "$(conf_value cache_path)" = "$dev" ]
    [ "$(json engine <<<"$(agent_status)")" = ucache ]
}

@test "clean: the agent, its configuration, state, loop device and file are gone" {
    load_settings
    plugin stack install
    plugin stack post-config
    dev=$(conf_value cache_path)
    plugin clean
    [ ! -e "$FCACHE_AGENT_BIN" ]
    [ ! -e "$FCACHE_CONF_DIR" ]
    [ ! -e "$FCACHE_STATE_DIR" ]
    [ ! -e "$FCACHE_RUN_DIR" ]
    refute grep -qF "$FCACHE_CACHE_FILE" <(losetup -nO BACK-FILE "$dev" 2>/dev/null)
}

@test "extra: one volume type per strategy with its fcache: specs, created once" {
    load_settings
    plugin stack extra
    [ "$(calls 'volume type create' | wc -l)" -eq 7 ]
    for s in none cachemior firepan firepan_if cloudcache hybrid auto; do
        calls "volume type create fcache-$s .*--property cacheable=<is> True --property fcache:strategy=$s --property fcache:cache_size=256M --property fcache:write_policy=write_through"
    done
    plugin stack extra
    [ "$(calls 'volume type create' | wc -l)" -eq 7 ]
}

@test "extra: without cinder-api, no volume type" {
    ENABLED_SERVICES=n-cpu
    load_settings
    plugin stack extra
    refute calls '^openstack'
}

@test "test-config: the Tempest plugin installed and its options set, one flag per strategy" {
    FCACHE_TEMPEST_STRATEGIES="hybrid none"
    load_settings
    plugin stack test-config
    calls "^tox -evenv-tempest -- pip install -c $REQUIREMENTS_DIR/upper-constraints.txt $REPO\$"
    calls "^iniset $TEMPEST_CONFIG service_available fcache True$"
    calls "^iniset $TEMPEST_CONFIG fcache write_policy write_back$"
    calls "^iniset $TEMPEST_CONFIG fcache agent_sockets $(hostname):$FCACHE_RUN_DIR/agent.sock$"
    calls "^iniset $TEMPEST_CONFIG fcache_feature_enabled hybrid True$"
    calls "^iniset $TEMPEST_CONFIG fcache_feature_enabled none True$"
    for s in cachemior firepan firepan_if cloudcache auto; do
        calls "^iniset $TEMPEST_CONFIG fcache_feature_enabled $s False$"
    done
}

@test "test-config: without tempest, nothing" {
    ENABLED_SERVICES=n-cpu,c-api
    load_settings
    plugin stack test-config
    refute calls "tempest"
}

@test "a host without fcache-agent enabled: no phase does anything" {
    load_settings
    ENABLED_SERVICES=n-cpu,c-api,tempest
    for phase in "stack pre-install" "stack install" "stack post-config" \
            "stack extra" "stack test-config" unstack clean; do
        # shellcheck disable=SC2086 # the phase is two words
        plugin $phase
    done
    [ ! -s "$CALLS" ]
}
