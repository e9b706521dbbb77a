# SPDX-License-Identifier: Apache-2.0
"""``fcache volume-*``: attach, inspect and detach volume caches."""

import argparse

from nova_ext import agent
from nova_ext.commands import output
from nova_ext import exception
from nova_ext import units

# volume-list's columns without --long: a volume's table row in 120
# characters (a Cinder volume id is 36).  cached_bytes and dirty_bytes are
# the blocks times the block size.
LIST_COLUMNS = ('volume_id', 'state', 'cache_size', 'cached_bytes',
                'dirty_bytes', 'hit_ratio')
# With --long these follow, then every other field the agent reports.
LONG_COLUMNS = ('write_policy', 'admission', 'writeback', 'connections',
                'origin', 'export_uri', 'cached_blocks', 'dirty_blocks',
                'block_size')
# volume-show's fields that come first.
SHOW_ORDER = ('volume_id', 'state', 'error', 'origin', 'export_uri',
              'engine', 'cache_size', 'write_policy', 'admission',
              'writeback', 'writeback_held', 'connections')


def size_arg(text):
    """argparse type for sizes: ``4096``, ``4K``, ``10M``, ``2G``."""
    try:
        return units.parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError('invalid size %r: %s' % (text, exc))


def rws_n_arg(text):
    """argparse type for RWS_N: an integer the agent tracks (1..7)."""
    try:
        return agent.check_rws_n(int(text, 10))
    except (ValueError, exception.InvalidArgument):
        raise argparse.ArgumentTypeError(
            'invalid RWS_N %r: must be an integer from %d to %d' % (
                text, agent.RWS_N_MIN, agent.RWS_N_MAX))


def window_arg(text):
    """argparse type for a demand window in seconds."""
    try:
        return agent.check_rws_window(int(text, 10))
    except (ValueError, exception.InvalidArgument):
        raise argparse.ArgumentTypeError(
            'invalid window %r: must be a number of seconds from 1 to %d'
            % (text, agent.RWS_WINDOW_MAX_S))


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'volume-attach', parents=parents,
        help='cache a volume and export it over NBD',
        description='Put a cache in front of ORIGIN and export the cached '
                    'volume as an NBD URI for the hypervisor to open.')
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    parser.add_argument('--origin', required=True, metavar='URI',
                        help='block device or file path, or an nbd:// / '
                             'nbd+unix:// URI of the origin volume')
    parser.add_argument('--cache-size', type=size_arg, metavar='N',
                        help='cache size of this volume in bytes, with an '
                             'optional unit: 4K, 10M, 2G (default: the '
                             "agent's)")
    parser.add_argument('--write-policy', choices=agent.WRITE_POLICIES,
                        help="write policy (default: the agent's)")
    parser.add_argument('--admission', choices=agent.ADMISSION_POLICIES,
                        help='which missed blocks enter the cache: all, or '
                             "the reuse working set (default: the agent's)")
    parser.add_argument('--rws-n', type=rws_n_arg, metavar='N',
                        help='with --admission rws: a block enters the cache '
                             'once reused N times within the window, N from '
                             '%d to %d (default: the agent\'s, 1)' % (
                                 agent.RWS_N_MIN, agent.RWS_N_MAX))
    parser.add_argument('--staging', choices=agent.STAGING_KINDS,
                        help='with --admission rws: what the in-memory '
                             'staging area keeps of a block not yet '
                             'admitted: its address, its address and read '
                             "data, or both in two partitions (default: the "
                             "agent's, hybrid)")
    parser.add_argument('--rws-window', type=window_arg, metavar='SECONDS',
                        help="this volume's demand window, in seconds "
                             "(default: the agent's allocation_window; "
                             "fcache-replay --profile-windows proposes one)")
    output.add_format_options(parser)
    parser.set_defaults(run=run_attach, render=render_table)

    parser = subparsers.add_parser(
        'volume-show', parents=parents,
        help="show a volume cache's settings, statistics and allocation",
        description="Show a volume cache's settings and statistics, and its "
                    "on-demand allocation (allocation.*: share, use and "
                    "limit, observed and predicted RWSS, staging area).")
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    output.add_format_options(parser)
    parser.set_defaults(run=run_show, render=render_table)

    parser = subparsers.add_parser(
        'volume-detach', parents=parents,
        help='flush and remove a volume cache and its export',
        description='Flush and remove a volume cache and its NBD export.')
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    parser.add_argument('--discard-dirty', action='store_true',
                        help='drop the dirty (write_back) blocks instead of '
                             'writing them back: only for a volume whose VM '
                             'was evacuated to another host, whose blocks '
                             'here are older than its storage (refused '
                             'while a client has the export open)')
    output.add_format_options(parser)
    parser.set_defaults(run=run_detach, render=render_detach)

    parser = subparsers.add_parser(
        'volume-claim', parents=parents,
        help='let the write-back held since an agent restart go on',
        description="After a restart the agent writes none of a write_back "
                    "volume's recovered dirty blocks back until the volume "
                    "is claimed (volume-show: writeback held); its VM "
                    "reconnecting claims it.  Claim it by hand when its VM "
                    "runs on this host; if the VM was evacuated, use "
                    "volume-detach --discard-dirty instead.")
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    output.add_format_options(parser)
    parser.set_defaults(run=run_claim, render=render_table)

    parser = subparsers.add_parser(
        'volume-list', parents=parents,
        help='list the cached volumes',
        description='List the volumes the agent caches: id, state, cache '
                    'size, cached and dirty bytes and read hit ratio; '
                    '--long adds every other field of volume-show.')
    output.add_format_options(parser, listing=True)
    parser.set_defaults(run=run_list, render=render_list)


def run_attach(client, args):
    return client.attach_volume(args.volume_id, args.origin,
                                cache_size=args.cache_size,
                                write_policy=args.write_policy,
                                admission=args.admission,
                                rws_n=args.rws_n, staging=args.staging,
                                rws_window_s=args.rws_window)


def run_show(client, args):
    return client.show_volume(args.volume_id)


def run_detach(client, args):
    return client.detach_volume(args.volume_id,
                                discard_dirty=args.discard_dirty)


def run_claim(client, args):
    return client.claim_volume(args.volume_id)


def run_list(client, args):
    return client.list_volumes()


def render_table(result, args):
    return output.format_one(args, result, SHOW_ORDER)


def render_detach(result, args):
    rest = dict((k, v) for k, v in result.items() if k != 'volume_id')
    if args.format != 'table':
        return output.format_one(args, result)
    text = 'volume %s detached\n' % args.volume_id
    return text + (output.format_one(args, rest) if rest else '')


def list_row(volume):
    """A volume of volume-list with its cached and dirty bytes."""
    if not isinstance(volume, dict):
        return {'volume_id': volume}        # an agent that lists ids
    row = dict(volume)
    block = volume.get('block_size')
    for name in ('cached', 'dirty'):
        blocks = volume.get(name + '_blocks')
        if isinstance(block, int) and isinstance(blocks, int):
            row[name + '_bytes'] = blocks * block
    return row


def render_list(result, args):
    volumes = result.get('volumes')
    if not isinstance(volumes, list):
        return output.format_one(args, result)
    return output.format_list(args, [list_row(v) for v in volumes],
                              LIST_COLUMNS, LONG_COLUMNS)
