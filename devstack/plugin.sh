#!/bin/bash
#
# plugin.sh - DevStack plugin entry point for fcache
#
# Dispatches DevStack phases to the functions in lib/fcache; nothing else
# belongs here.

# Save trace setting
_XTRACE_FCACHE_PLUGIN=$(set +o | grep xtrace)
set -o xtrace

source $FCACHE_PLUGIN_DIR/lib/fcache

if is_service_enabled fcache-agent; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing fcache"
        install_fcache
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring and starting fcache-agent"
        configure_fcache
        start_fcache_agent
    elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
        if is_service_enabled tempest; then
            echo_summary "Configuring the fcache Tempest plugin"
            configure_fcache_tempest
        fi
    fi

    if [[ "$1" == "unstack" ]]; then
        stop_fcache_agent
    fi

    if [[ "$1" == "clean" ]]; then
        cleanup_fcache
    fi
fi

# Restore xtrace
$_XTRACE_FCACHE_PLUGIN
