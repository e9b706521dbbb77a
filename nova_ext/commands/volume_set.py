# SPDX-License-Identifier: Apache-2.0
"""``fcache volume-set``: change an attached volume's policy or cache size.

What ``casadm --set-cache-mode`` and ``lvchange --cachemode`` do for their
caches: no detach, nothing lost.  Leaving ``write_back``, or shrinking a
cache that holds dirty blocks, the agent writes them back to the origin
before it answers, so the command waits as long as that takes
(``--timeout``).
"""

import argparse

from nova_ext import agent
from nova_ext.commands import output
from nova_ext.commands import volume

# A write-back at the origin's pace: a GiB at 100 MB/s takes ten seconds;
# the agent's answer comes once the last dirty block is out.
DEFAULT_TIMEOUT_S = 600.0


def _timeout(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('not a number: %r' % text)
    if not value > 0:
        raise argparse.ArgumentTypeError('must be positive: %r' % text)
    return value


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'volume-set', parents=parents,
        help="change an attached volume's write policy or cache size "
             "while its VM runs",
        description="Change an attached volume's write policy or cache "
                    "size with no detach.  Leaving write_back, every dirty "
                    "block is written back to the origin first (the VM's "
                    "writes wait only for the last pass).  A smaller cache "
                    "gives its least recently used blocks back to the "
                    "host, writing dirty ones back to the origin first; a "
                    "larger one takes the host's free cache (with "
                    "allocation = fixed, what the other volumes' cache "
                    "sizes leave).  If the origin fails, the volume keeps "
                    "its old policy and size and loses nothing.  The new "
                    "settings are kept across agent restarts.  Refused "
                    "while the volume migrates or moves, and by the "
                    "dmcache engine.")
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    parser.add_argument('--write-policy', choices=agent.WRITE_POLICIES,
                        help='the new write policy')
    parser.add_argument('--cache-size', type=volume.size_arg, metavar='N',
                        help="the volume's new cache size (4K, 10M, 2G), a "
                             'multiple of the agent\'s block_size; the '
                             'answer gives the blocks written back and '
                             'given back to the host')
    parser.add_argument('--timeout', type=_timeout,
                        default=DEFAULT_TIMEOUT_S, metavar='S',
                        help='how long to wait for the write-back '
                             '(default %d); the agent finishes it anyway'
                             % DEFAULT_TIMEOUT_S)
    parser.set_defaults(run=run, render=render)


def run(client, args):
    client = agent.AgentClient(client.socket_path, timeout=args.timeout)
    return client.set_volume(args.volume_id, write_policy=args.write_policy,
                             cache_size=args.cache_size)


def render(result, args):
    return output.format_table(result)
