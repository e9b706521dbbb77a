# SPDX-License-Identifier: Apache-2.0
"""tools/cloud.sh up|down|status|tempest: see doc/install/cloud-box.rst."""

import argparse
import os
import shutil
import sys
import time
import uuid

from cloudbox import catalog
from cloudbox import computes
from cloudbox import infra
from cloudbox import layout
from cloudbox import network
from cloudbox import procs
from cloudbox import services


def _say(msg):
    print('cloud-box: %s' % msg, flush=True)


def _secret_uuid(box):
    path = os.path.join(box.dir, 'rbd-secret-uuid')
    if not os.path.exists(path):
        with open(path, 'w') as f:
            f.write(str(uuid.uuid4()))
    with open(path) as f:
        return f.read().strip()


def up(box, args):
    t0 = time.monotonic()
    box.makedirs()
    services.pylib(box)
    services.bindir(box)
    step = [t0]

    def done(what):
        now = time.monotonic()
        _say('%-44s %5.1f s' % (what, now - step[0]))
        step[0] = now

    network.up(box)
    done('network: bridge %s, namespaces' % layout.BRIDGE)
    infra.start_mariadb(box)
    done('MariaDB')
    infra.start_rabbitmq(box)
    done('RabbitMQ')
    infra.start_ceph(box)
    done('Ceph (one mon, one OSD)')
    secret = _secret_uuid(box)
    services.keystone(box)
    services.wait_http(box, 'keystone', '/v3')
    catalog.identity(box)
    done('Keystone, service users, catalog')
    services.placement(box)
    services.glance(box)
    services.neutron(box)
    services.nova(box, secret)
    services.cinder(box, secret)
    for name, path in (('placement', '/'), ('glance', '/'),
                       ('neutron', '/'), ('nova-api', '/'),
                       ('cinder-api', '/')):
        services.wait_http(box, name, path)
    catalog.prime_neutron(box)
    done('Placement, Glance, Neutron, Nova, Cinder')
    for h in box.hosts:
        computes.start_libvirtd(box, h)
        computes.define_secret(box, h, secret)
        computes.start_agent(box, h)
        computes.start_nova_compute(box, h)
    catalog.wait_computes(box)
    services.discover_hosts(box)
    done('compute hosts %s' % ', '.join(h.name for h in box.hosts))
    catalog.seed(box)
    catalog.write_clouds_yaml(box)
    done('guest image, flavor, volume types')
    _say('up in %.0f s; logs in %s; try: openstack --os-cloud %s '
         'server list' % (time.monotonic() - t0, box.logs,
                          layout.CLOUD_NAME))
    status(box, args)


def down(box, args):
    for h in box.hosts:
        if procs.pid_of(box, 'libvirtd-%s' % h.name):
            computes.destroy_domains(h)
    for h in box.hosts:
        for name in computes.daemons(h):
            procs.stop(box, name)
    for name in reversed(services.CONTROL):
        procs.stop(box, name)
    for name in procs.names(box):      # anything else the box started
        procs.stop(box, name)
    infra.stop_ceph(box)
    network.down(box)
    catalog.remove_clouds_yaml_entry()
    from cloudbox import tempest_run
    tempest_run.forget_workspace(box)
    # The next "up" makes a new cloud: a database that named volumes of a
    # Ceph cluster gone, or domains of a libvirtd gone, would only mislead.
    # The logs stay for a look afterwards, the guest's build for the next.
    if os.path.isdir(box.dir):
        for entry in os.listdir(box.dir):
            path = os.path.join(box.dir, entry)
            if path in (box.logs, box.cache):
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    _say('down: nothing of the box runs; its logs stay in %s' % box.logs)


def status(box, args):
    running = 0
    for name in services.CONTROL:
        pid = procs.pid_of(box, name)
        running += bool(pid)
        print('%-18s %-8s %s' % (name, 'pid %d' % pid if pid else 'stopped',
                                 box.log(name)))
    for line in network.status(box):
        print(line)
    for h in box.hosts:
        states = []
        for name in computes.daemons(h):
            pid = procs.pid_of(box, name)
            running += bool(pid)
            states.append('%s %s' % (name.rsplit('-', 2)[0]
                                     if name.startswith('nova') else
                                     name.split('-' + h.name)[0],
                                     'up' if pid else 'down'))
        print('HOST %s %s %s agent socket %s' % (h.name, h.ip,
                                                 ', '.join(states),
                                                 h.agent_socket))
    return 0 if running else 3


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='tools/cloud.sh',
        description='A small real OpenStack with fcache on this machine.')
    parser.add_argument('--dir', default=layout.default_dir(),
                        help='where the box keeps its state, logs and data '
                             '(default: $FCACHE_BOX_DIR or %(default)s)')
    sub = parser.add_subparsers(dest='command', required=True)
    sub.add_parser('up', help='start the box (idempotent)')
    sub.add_parser('down', help='stop everything the box started')
    sub.add_parser('status', help='list the services and compute hosts')
    t = sub.add_parser('tempest', help="run fcache's Tempest scenarios "
                                       "against the box")
    t.add_argument('regex', nargs='?', default='fcache_tempest_plugin',
                   help='which tests (default: %(default)s)')
    t.add_argument('--concurrency', type=int, default=1,
                   help='tests run at once (default: %(default)s)')
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error('the box needs root (namespaces, libvirtd, MariaDB)')
    box = layout.Box(args.dir)
    try:
        layout.virt_type()
    except ValueError as exc:
        parser.error(str(exc))
    try:
        if args.command == 'up':
            up(box, args)
        elif args.command == 'down':
            down(box, args)
        elif args.command == 'status':
            return status(box, args)
        elif args.command == 'tempest':
            from cloudbox import tempest_run
            return tempest_run.run(box, args.regex, args.concurrency)
    except procs.BoxError as exc:
        print('cloud-box: %s' % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
