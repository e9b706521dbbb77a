# SPDX-License-Identifier: Apache-2.0
"""Guests that ride out a restart of the fcache agent.

A ucache volume reaches its guest over NBD on a unix socket the agent
serves.  When the agent restarts (an upgrade, or a crash that systemd's
``Restart=on-failure`` answers), that connection drops.  QEMU's NBD client
reconnects by itself, but with its default ``reconnect-delay`` of 0 the
requests that meet the outage fail at once: the guest sees I/O errors, and
a write among them is lost.  With a delay of N seconds QEMU holds those
requests, and the ones in flight, while it reconnects, and sends them
again to the restarted agent, which serves the same export from the same
socket with the cache still warm.

libvirt says so in the disk XML from 9.x (``<reconnect delay='N'/>`` in an
NBD ``<source>``); libvirt 9.0 (Debian 12) has no such element.  On every
version this module sets it on the running QEMU instead: QEMU cannot change
``reconnect-delay`` of a node in place (``blockdev-reopen`` refuses the
option), but it can move the disk's format node onto a new NBD node.  So
for each fcache disk, through QMP:

1. ``blockdev-add`` a temporary NBD node to the same export, with the delay;
2. ``blockdev-reopen`` the format node onto it, ``blockdev-del`` libvirt's
   NBD node;
3. the same again back onto a node with libvirt's own name
   (``libvirt-<index>-storage``), so that libvirt's later steps (detach,
   block jobs) find the graph they made.

Each reopen drains the disk for a moment; nothing is lost or reordered.
libvirt marks the domain "tainted: custom-monitor" in its log, once.  The
driver calls this after it starts a guest, attaches a volume to a running
one, and on a live migration's destination.
"""

import json
from xml.etree import ElementTree

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

TEMP_NODE = 'fcache-reconnect-%s'


class ReconnectError(Exception):
    """QEMU refused a step; the disk keeps the node it had."""


def fcache_disks(domain_xml, sockets):
    """The NBD disks of ``domain_xml`` served on one of ``sockets``.

    :returns: dicts with ``index`` (libvirt's node index), ``target``
        (the guest's device name, ``vdb``), ``socket``,
        ``export`` (or None) and ``discard`` (the driver's, 'ignore' when
        unset), for disks libvirt built with ``-blockdev``.
    """
    out = []
    root = ElementTree.fromstring(domain_xml)
    for disk in root.findall('./devices/disk'):
        src = disk.find('source')
        if disk.get('type') != 'network' or src is None or \
                src.get('protocol') != 'nbd':
            continue
        host = src.find('host')
        if host is None or host.get('transport') != 'unix' or \
                host.get('socket') not in sockets:
            continue
        if src.get('index') is None:
            # Without -blockdev (libvirt < 5.10 or QEMU < 4.2) there are no
            # node names to work on.
            LOG.warning('fcache disk on %s has no libvirt node index; its '
                        'guest will see I/O errors across an agent restart',
                        host.get('socket'))
            continue
        drv = disk.find('driver')
        target = disk.find('target')
        out.append({'index': src.get('index'), 'socket': host.get('socket'),
                    'target': target.get('dev') if target is not None
                    else None,
                    'export': src.get('name'),
                    'discard': (drv.get('discard') if drv is not None
                                else None) or 'ignore'})
    return out


class _Qmp(object):
    def __init__(self, domain, command):
        self.domain = domain
        self.command = command

    def __call__(self, execute, **arguments):
        msg = {'execute': execute}
        if arguments:
            msg['arguments'] = arguments
        reply = json.loads(self.command(self.domain, json.dumps(msg), 0))
        if 'error' in reply:
            raise ReconnectError(
                '%s: %s' % (execute, reply['error'].get('desc')))
        return reply.get('return')


def monitor(domain, monitor_command=None):
    """A QMP caller on ``domain``, for :func:`reopen`.

    :param monitor_command: ``libvirt_qemu.qemuMonitorCommand`` by default
        (tests may pass another).
    """
    if monitor_command is None:
        import libvirt_qemu
        monitor_command = libvirt_qemu.qemuMonitorCommand
    return _Qmp(domain, monitor_command)


def block_nodes(qmp):
    """QEMU's block nodes by name, as :func:`reopen` takes them."""
    return {n['node-name']: n for n in qmp('query-named-block-nodes',
                                           flat=True)}


def _nbd_node(disk, name, cache, delay):
    node = {'driver': 'nbd', 'node-name': name,
            'server': {'type': 'unix', 'path': disk['socket']},
            'reconnect-delay': delay, 'auto-read-only': True,
            'discard': disk['discard'], 'cache': cache}
    if disk['export']:
        node['export'] = disk['export']
    return node


def _format_node(fmt, disk, file_node):
    return {'driver': fmt['drv'], 'node-name': fmt['node-name'],
            'file': file_node, 'read-only': fmt['ro'],
            'discard': disk['discard'],
            'cache': {'direct': fmt['cache']['direct'],
                      'no-flush': fmt['cache']['no-flush']},
            'detect-zeroes': fmt.get('detect_zeroes', 'off')}


def _move_format(qmp, fmt, disk, file_node):
    qmp('blockdev-reopen', options=[_format_node(fmt, disk, file_node)])


def set_delay(domain, sockets, delay, monitor_command=None):
    """Give the NBD client of each fcache disk of ``domain`` ``delay`` s.

    :param domain: a running (or paused) libvirt ``virDomain``.
    :param sockets: the agent export sockets whose disks to change.
    :param monitor_command: ``libvirt_qemu.qemuMonitorCommand`` (tests may
        pass another).
    :returns: how many disks were changed.
    :raises ReconnectError: QEMU refused a step (that disk keeps working,
        without the delay).
    """
    disks = fcache_disks(domain.XMLDesc(0), set(sockets))
    if not disks:
        return 0
    qmp = monitor(domain, monitor_command)
    nodes = block_nodes(qmp)
    changed = 0
    for disk in disks:
        if reopen(qmp, nodes, disk, delay):
            changed += 1
    return changed


def reopen(qmp, nodes, disk, delay):
    """Put ``disk``'s format node onto a new NBD node with ``delay``.

    The new node asks the agent afresh for the export: its size too, which
    is how a guest disk sees an online extend (QEMU cannot grow an NBD
    node in place).

    :param qmp: from :func:`monitor`.
    :param nodes: from :func:`block_nodes`.
    :param disk: one of :func:`fcache_disks`.
    :returns: False if QEMU has not the nodes libvirt named (left as is).
    :raises ReconnectError: QEMU refused a step (the disk keeps a working
        node).
    """
    storage = 'libvirt-%s-storage' % disk['index']
    fmt = nodes.get('libvirt-%s-format' % disk['index'])
    if fmt is None or storage not in nodes:
        LOG.warning('fcache disk on %s: QEMU has no node %s; left as it '
                    'is', disk['socket'], storage)
        return False
    cache = {'direct': nodes[storage]['cache']['direct'],
             'no-flush': nodes[storage]['cache']['no-flush']}
    temp = TEMP_NODE % disk['index']
    qmp('blockdev-add', **_nbd_node(disk, temp, cache, delay))
    try:
        _move_format(qmp, fmt, disk, temp)
    except ReconnectError:
        qmp('blockdev-del', **{'node-name': temp})
        raise
    qmp('blockdev-del', **{'node-name': storage})
    qmp('blockdev-add', **_nbd_node(disk, storage, cache, delay))
    _move_format(qmp, fmt, disk, storage)
    qmp('blockdev-del', **{'node-name': temp})
    return True
