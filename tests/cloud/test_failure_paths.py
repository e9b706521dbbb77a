# SPDX-License-Identifier: Apache-2.0
"""What a user sees when fcache stops a live migration, on a real cloud.

Each case boots an fcache-guest server from a write_back volume on box-a,
waits until the guest has written its data and read them back, asks Nova
to live-migrate it to box-b, and checks what the API answers, what the
operator is told, and what is left: the server ACTIVE on box-a, its volume
still cached there by the agent, the guest still reading the data it
wrote.

Nova answers a migration to a named host that fails its pre-checks with
400 "No valid host was found"; the reason (fcache's refusal) is in the
source host's nova-compute log, which is where the test reads it.
"""

import errno
import time
import uuid

import openstack
import pytest

from cloudbox import catalog
from cloudbox import computes
from cloudbox import procs
from fcache_tempest_plugin.common import console
from nova_ext import agent
from nova_ext import exception

WAIT = 300
MICROVERSION = '2.67'


def cached_here(host, volume_id):
    try:
        return bool(agent.AgentClient(host.agent_socket).show_volume(
            volume_id))
    except exception.AgentError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise


def console_report(conn, server):
    """The md5 fcache-guest wrote and its reads (seq, md5, ms) so far."""
    report = console.Report(
        conn.compute.get_server_console_output(server)['output'])
    return report.written, report.reads


def wait_reads(conn, server, after=0):
    deadline = time.time() + WAIT
    while time.time() < deadline:
        written, reads = console_report(conn, server)
        newer = [r for r in reads if r[0] > after]
        if written and newer:
            return written, newer
        time.sleep(2)
    raise AssertionError('fcache-guest reported no read after %d within '
                         '%d s' % (after, WAIT))


@pytest.fixture
def server(conn, box):
    """A factory: a server on box-a booted from a volume of a new type."""
    made = []

    def boot(cache_size):
        name = 'fcache-fail-%s' % uuid.uuid4().hex[:8]
        vt = conn.block_storage.create_type(name=name, extra_specs={
            'cacheable': '<is> True', 'volume_backend_name': 'ceph',
            'fcache:strategy': 'hybrid', 'fcache:cache_size': cache_size,
            'fcache:write_policy': 'write_back'})
        image = conn.image.find_image(catalog.IMAGE)
        flavor = conn.compute.find_flavor(catalog.FLAVOR)
        srv = conn.compute.create_server(
            name=name, flavor_id=flavor.id, networks='none',
            availability_zone='nova:%s' % box.hosts[0].name,
            block_device_mapping=[{
                'uuid': image.id, 'source_type': 'image',
                'destination_type': 'volume', 'boot_index': 0,
                'volume_size': 1, 'volume_type': name,
                'delete_on_termination': True}])
        made.append((srv, vt))
        srv = conn.compute.wait_for_server(srv, wait=WAIT)
        return srv

    yield boot
    for srv, vt in made:
        conn.compute.delete_server(srv)
        conn.compute.wait_for_delete(srv, wait=WAIT)
        deadline = time.time() + WAIT
        while time.time() < deadline:
            try:
                conn.block_storage.delete_type(vt)
                break
            except (openstack.exceptions.ConflictException,
                    openstack.exceptions.BadRequestException):
                # Its volume is still being deleted: Cinder answers 400
                # "Target volume type is still in use" (409 in some
                # releases) until it is gone.
                time.sleep(2)


def volume_of(conn, srv):
    attached = conn.compute.get_server(srv).attached_volumes
    assert len(attached) == 1, attached
    return attached[0]['id']


def refused_migration(conn, srv, host):
    conn.compute.default_microversion = MICROVERSION
    with pytest.raises(openstack.exceptions.HttpException) as err:
        conn.compute.live_migrate_server(srv, host=host,
                                         block_migration='auto')
    return err.value


def refusal_logged(box, volume_id, reason):
    """The source's nova-compute logged fcache's refusal of the volume."""
    with open(box.log('nova-compute-%s' % box.hosts[0].name),
              errors='replace') as f:
        lines = [line for line in f if 'Live migration refused:' in
                 line and volume_id in line]
    assert lines, 'no refusal of %s in the log of nova-compute' % volume_id
    assert reason in lines[-1], lines[-1]


def still_on_source(conn, box, srv, written, volume_id):
    srv = conn.compute.get_server(srv)
    assert srv.status == 'ACTIVE', srv.status
    assert srv.compute_host == box.hosts[0].name
    assert cached_here(box.hosts[0], volume_id)
    _, reads = console_report(conn, srv)
    _, newer = wait_reads(conn, srv, after=reads[-1][0])
    assert all(got == written for _, got, _ in newer), newer


def test_destination_too_small_is_refused(conn, box, server):
    """A cache that fits only box-a's flash is refused a move to box-b."""
    srv = server('200M')
    volume_id = volume_of(conn, srv)
    written, reads = wait_reads(conn, srv)
    assert all(got == written for _, got, _ in reads)

    exc = refused_migration(conn, srv, box.hosts[1].name)
    assert exc.status_code == 400, exc
    assert 'No valid host' in str(exc), str(exc)
    refusal_logged(box, volume_id, 'has 167772160 bytes of cache in all')
    still_on_source(conn, box, srv, written, volume_id)


def test_agent_down_on_destination_is_refused(conn, box, server):
    """A write_back cache never leaves for a host whose agent is down.

    Nova refuses; the VM keeps running on its host with its cache.
    """
    srv = server('64M')
    volume_id = volume_of(conn, srv)
    written, _ = wait_reads(conn, srv)
    dest = box.hosts[1]
    procs.stop(box, 'fcache-agent-%s' % dest.name)
    try:
        exc = refused_migration(conn, srv, dest.name)
    finally:
        computes.start_agent(box, dest)
    assert exc.status_code == 400, exc
    assert 'No valid host' in str(exc), str(exc)
    refusal_logged(box, volume_id, 'its fcache agent did not answer')
    still_on_source(conn, box, srv, written, volume_id)
