# SPDX-License-Identifier: Apache-2.0
"""Tempest plugin of fcache: a cached volume through a live migration.

Entry point ``tempest.test_plugins``: ``fcache =
fcache_tempest_plugin.plugin:FcacheTempestPlugin``.  Install it into
Tempest's environment (DevStack: ``devstack/``, test-config phase).
"""
