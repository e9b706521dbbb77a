# shellcheck shell=bash
# SPDX-License-Identifier: Apache-2.0
# Stand-ins for DevStack, sourced by the bats tests of devstack/.
#
# DevStack itself cannot run here: stack.sh clones every project from the
# internet.  So the tests source the real devstack/settings, lib/fcache and
# plugin.sh phase by phase, as stack.sh does, against these stand-ins for
# DevStack's own functions and for the OpenStack clients.  They record each
# call in $CALLS, one line each, for the tests to check what the plugin
# would install and configure.  Everything else is real: make builds the
# agent, losetup creates the loop device, and run_process starts the real
# fcache-agent with the configuration the plugin wrote (where DevStack
# would write a devstack@fcache-agent systemd unit).

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# setup_standins - a fresh DevStack-like world under $BATS_TEST_TMPDIR
function setup_standins {
    T=$BATS_TEST_TMPDIR
    CALLS=$T/calls.log
    : >"$CALLS"
    mkdir -p "$T/bin" "$T/etc" "$T/tempest"
    # External commands: executables on PATH, so that the sh -c of
    # test_with_retry sees them too.  We run as root: sudo just runs.
    printf '#!/bin/sh\nexec "$@"\n' >"$T/bin/sudo"
    # openstack: a volume type exists once created ($T/types).
    cat >"$T/bin/openstack" <<'EOF'
#!/bin/bash
echo "openstack $*" >>"$CALLS"
args=" $* "
name=$(printf '%s\n' "$@" | grep -m1 '^fcache-')
case "$args" in
    *" volume type show "*) grep -qx "$name" "$T/types" 2>/dev/null ;;
    *" volume type create "*) echo "$name" >>"$T/types" ;;
    *) exit 1 ;;
esac
EOF
    # shellcheck disable=SC2016 # expanded when the stand-in runs
    printf '#!/bin/sh\necho "tox $*" >>"$CALLS"\n' >"$T/bin/tox"
    chmod +x "$T/bin/sudo" "$T/bin/openstack" "$T/bin/tox"
    export PATH="$T/bin:$PATH" CALLS T

    # What stack.sh has set before it sources a plugin.
    STACK_USER=root
    DATA_DIR=$T/data
    HOST_IP=127.0.0.1
    NOVA_CONF=$T/etc/nova.conf
    CINDER_CONF=$T/etc/cinder.conf
    TEMPEST_CONFIG=$T/etc/tempest.conf
    TEMPEST_DIR=$T/tempest
    REQUIREMENTS_DIR=$T/requirements
    ENABLED_SERVICES=${ENABLED_SERVICES-n-cpu,c-api,tempest}

    # Keep the plugin's files inside the test's directory, and the agent
    # small and off the ports other tests and agents use.
    FCACHE_AGENT_BIN=$T/bin/fcache-agent
    FCACHE_CONF_DIR=$T/etc/fcache
    FCACHE_RUN_DIR=$T/run
    FCACHE_CACHE_SIZE=${FCACHE_CACHE_SIZE:-64M}
    FCACHE_MIGRATION_LISTEN=127.0.0.1:$((20000 + RANDOM % 20000))
    FCACHE_START_TIMEOUT=${FCACHE_START_TIMEOUT:-20}
}

# teardown_standins - stop the agent and free the loop devices a test made
function teardown_standins {
    local pid dev
    if [[ -f "$T/agent.pid" ]]; then
        pid=$(cat "$T/agent.pid")
        kill "$pid" 2>/dev/null && wait_gone "$pid"
    fi
    for dev in $(losetup -nO NAME,BACK-FILE | awk -v t="$T/" 'index($2, t) == 1 {print $1}'); do
        losetup -d "$dev"
    done
}

# wait_gone PID - wait up to 30 s for a process to exit
function wait_gone {
    local _
    for _ in $(seq 300); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    echo "process $1 did not exit" >&2
    return 1
}

# plugin PHASE [SUBPHASE] - what stack.sh, unstack.sh and clean.sh do:
# source the plugin with the phase as its arguments
function plugin {
    # plugin.sh turns xtrace on, as DevStack plugins do; bats' DEBUG trap
    # would then trace itself for every command, so it is off meanwhile
    # and the trace goes to a file.
    local saved_trap xfd r=0
    saved_trap=$(trap -p DEBUG)
    trap - DEBUG
    exec {xfd}>>"$T/xtrace.log"
    # shellcheck source=devstack/plugin.sh
    BASH_XTRACEFD=$xfd source "$REPO/devstack/plugin.sh" "$@" || r=$?
    exec {xfd}>&-
    eval "$saved_trap"
    return $r
}

# load_settings - what stack.sh does first with an enabled plugin
function load_settings {
    FCACHE_PLUGIN_DIR=$REPO/devstack
    # shellcheck source=devstack/settings
    source "$REPO/devstack/settings"
}

# --- DevStack's functions -------------------------------------------------

function is_service_enabled {
    local s
    for s in "$@"; do
        [[ ",$ENABLED_SERVICES," == *",$s,"* ]] && return 0
    done
    return 1
}

function enable_service {
    ENABLED_SERVICES="$ENABLED_SERVICES,$1"
}

function is_ubuntu {
    return 0
}

function echo_summary {
    echo "summary: $*" >>"$CALLS"
}

# DevStack's die exits stack.sh with the message.
function die {
    shift
    echo "die: $*" >>"$CALLS"
    echo "ERROR: $*" >&2
    exit 1
}

function install_package {
    echo "install_package $*" >>"$CALLS"
}

function setup_develop {
    echo "setup_develop $*" >>"$CALLS"
}

function pip_install {
    echo "pip_install $*" >>"$CALLS"
}

function iniset {
    echo "iniset $*" >>"$CALLS"
}

function iniadd {
    echo "iniadd $*" >>"$CALLS"
}

# run_process: DevStack writes devstack@NAME.service with User=USER and
# starts it; this starts the same command in the background, as root.
function run_process {
    echo "run_process $1 [$2] group=$3 user=$4" >>"$CALLS"
    # shellcheck disable=SC2086 # a command line, as systemd splits it
    $2 >"$T/agent.log" 2>&1 &
    echo $! >"$T/agent.pid"
}

function stop_process {
    echo "stop_process $1" >>"$CALLS"
    if [[ -f "$T/agent.pid" ]]; then
        local pid
        pid=$(cat "$T/agent.pid")
        kill "$pid" 2>/dev/null && wait_gone "$pid"
        rm -f "$T/agent.pid"
    fi
    return 0
}

# DevStack's semantics: poll a shell command until it succeeds or die.
function test_with_retry {
    if ! timeout "${3:-10}" sh -c "while ! $1; do sleep ${4:-0.5}; done"; then
        die $LINENO "$2"
    fi
}
