#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# plugin.sh - DevStack plugin entry point for fcache
#
# Dispatches DevStack's phases to the functions in lib/fcache; nothing else
# belongs here.  DevStack sources this file with the phase as arguments:
# stack pre-install|install|post-config|extra|test-config, unstack, clean.

# Save trace setting
_XTRACE_FCACHE_PLUGIN=$(set +o | grep xtrace)
set -o xtrace

# shellcheck source=devstack/lib/fcache
source "$FCACHE_PLUGIN_DIR/lib/fcache"

if is_service_enabled fcache-agent; then
    case "$1/$2" in
        stack/pre-install)
            echo_summary "Installing fcache prerequisites"
            install_fcache_prereqs
            ;;
        stack/install)
            echo_summary "Building and installing fcache"
            install_fcache
            ;;
        stack/post-config)
            echo_summary "Configuring and starting fcache-agent"
            configure_fcache
            start_fcache_agent
            ;;
        stack/extra)
            if is_service_enabled c-api; then
                echo_summary "Creating the fcache volume types"
                create_fcache_volume_types
            fi
            ;;
        stack/test-config)
            if is_service_enabled tempest; then
                echo_summary "Configuring the fcache Tempest plugin"
                configure_fcache_tempest
            fi
            ;;
        unstack/*)
            stop_fcache_agent
            ;;
        clean/*)
            cleanup_fcache
            ;;
    esac
fi

# Restore xtrace
$_XTRACE_FCACHE_PLUGIN
