# SPDX-License-Identifier: Apache-2.0
"""The migration registry over many migrations.

The registry keeps at most 64 migrations.  A finished one stays listed for
``migration-status`` until a new migration needs its slot; a completed
incoming migration whose volume stayed on the destination used to keep
its slot for good, so the 65th migration to a host was refused ("too many
migrations in progress") while nothing was in progress.
"""

import pytest

from nova_ext import migration

from fcache_testkit import oracle as om

MiB = 1 << 20
COUNT = 70          # more than the registry's 64 slots


@pytest.mark.timeout(300)
def test_a_host_takes_more_migrations_than_its_registry_holds(
        make_agent, make_origin):
    src = make_agent(name='src', cache_size='16M').start()
    dst = make_agent(name='dst', cache_size='16M').start()
    origin = make_origin(4 * MiB)
    s, d = src.client(), dst.client()
    for i in range(COUNT):
        vid = 'vol%d' % i
        # One disk per volume, as the agent sees it (an export each); the
        # server serves the same file under every name.
        uri = origin.uri.replace(':///', ':///%s' % vid, 1)
        src.attach(vid, uri, cache_size=64 * 1024,
                   write_policy='read_only')
        res = migration.migrate(s, d, vid, 'none')
        assert res['state'] == 'completed', (i, res)
        # The volume stays on the destination, as it does under Nova.
        assert dst.show(vid)['state'] == 'attached'
    # Every volume still reads the origin's data through its export.
    orc = om.Oracle(origin.content)
    for vid in ('vol0', 'vol%d' % (COUNT - 1)):
        h = om.connect(dst.show(vid)['export_uri'])
        try:
            assert not om.verify_all(h, orc, vid)
        finally:
            om.close(h)
    src.assert_alive()
    dst.assert_alive()
