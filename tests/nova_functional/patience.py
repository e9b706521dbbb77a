# SPDX-License-Identifier: Apache-2.0
"""Waiting for a live migration that moves a cache.

Nova's ``InstanceHelperMixin._wait_for_migration_status`` gives a
migration 5 s (ten polls half a second apart): enough for its fake
libvirt alone, but here each migration also moves a volume's cache
between two real agents (ASan builds), which on a loaded 2-core CI
machine took longer (a hybrid migration's copy of 4 MiB, still running
after 5 s).  The state asked for is the same; only the wait is longer.
"""

import time

MIGRATION_WAIT_S = 120.0
POLL_S = 0.5


class MigrationPatienceMixin(object):
    """Gives ``_wait_for_migration_status`` MIGRATION_WAIT_S, not 5 s."""

    def _wait_for_migration_status(self, server, expected_statuses):
        api = getattr(self, 'admin_api', self.api)
        statuses = [status.lower() for status in expected_statuses]
        actual = None
        deadline = time.monotonic() + MIGRATION_WAIT_S
        while True:
            for migration in api.api_get('/os-migrations').body[
                    'migrations']:
                if migration['instance_uuid'] == server['id']:
                    actual = migration['status']
                    if actual.lower() in statuses:
                        return migration
            if time.monotonic() >= deadline:
                self.fail('no migration of instance %s reached %s within '
                          '%.0f s (last status: %s)'
                          % (server['id'], statuses, MIGRATION_WAIT_S,
                             actual))
            time.sleep(POLL_S)
