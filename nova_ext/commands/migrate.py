"""``fcache migrate``: move a volume's cache to another host's agent.

Without ``--phase`` every phase runs in order (with ``--wait`` until the
destination is complete and the source released; without it the command
returns after the switchover with the migration id, and ``--phase finish``
completes it later).  With ``--phase`` a hypervisor that moves the VM
itself drives the phases one by one::

    fcache migrate VOL --from A --to B --strategy hybrid --phase prepare
    fcache migrate VOL --from A --to B --migration MID --phase start
    ... the VM moves ...
    fcache migrate VOL --from A --to B --migration MID --phase switchover
    fcache migrate VOL --from A --to B --migration MID --phase finish --wait

After a failure past the switchover both agents hold the volume until it
is settled (``--source-lost`` when the source host is gone for good)::

    fcache migrate VOL --from A --to B --migration MID --phase settle
"""

import argparse

from nova_ext import agent
from nova_ext.commands import output
from nova_ext import exception
from nova_ext import migration


def _mbps(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('not a number: %r' % text)
    if value <= 0:
        raise argparse.ArgumentTypeError('must be positive: %r' % text)
    return value


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'migrate', parents=parents,
        help="move a volume's cache to another host's agent",
        description="Move a volume's cache from the agent at --from to the "
                    "agent at --to with a warm-up strategy.")
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    parser.add_argument('--from', dest='src', required=True, metavar='SOCK',
                        help="source agent's control socket")
    parser.add_argument('--to', dest='dst', required=True, metavar='SOCK',
                        help="destination agent's control socket")
    parser.add_argument('--strategy', choices=migration.STRATEGIES,
                        default='auto', help='warm-up strategy (default auto)')
    parser.add_argument('--rate-limit', type=_mbps, metavar='MBPS',
                        help='cap the transfer at MBPS megabytes per second '
                             '(background and on-demand together)')
    parser.add_argument('--phase', choices=migration.PHASES,
                        help='run one phase only (see the description)')
    parser.add_argument('--migration', metavar='MID',
                        help='migration id from --phase prepare')
    parser.add_argument('--wait', action='store_true',
                        help='wait until the migration completes')
    parser.add_argument('--source-lost', action='store_true',
                        help='with --phase settle: the source is gone for '
                             'good; give up the blocks only it had')
    parser.add_argument('--timeout', type=float, default=600.0, metavar='S',
                        help='how long --wait may take (default 600)')
    output.add_format_options(parser)
    parser.set_defaults(run=run, render=render)


def run(client, args):
    src = agent.AgentClient(args.src)
    dst = agent.AgentClient(args.dst)
    if args.phase and args.phase != 'prepare' and not args.migration:
        raise exception.InvalidArgument(
            name='--migration', value=None,
            reason='--phase %s needs the id printed by --phase prepare'
            % args.phase)
    if args.phase == 'prepare':
        return migration.prepare(src, dst, args.volume_id, args.strategy,
                                 args.rate_limit,
                                 migration_id=args.migration)
    if args.phase == 'start':
        return migration.start(src, dst, args.migration)
    if args.phase == 'switchover':
        return migration.switchover(src, dst, args.migration)
    if args.phase == 'finish':
        if not args.wait:
            return migration.status(dst, args.migration)
        return migration.finish(src, dst, args.migration,
                                timeout_s=args.timeout)
    if args.phase == 'abort':
        return migration.abort(src, dst, args.migration)
    if args.phase == 'settle':
        return migration.settle(src, dst, args.migration, args.volume_id,
                                source_lost=args.source_lost)
    if args.wait:
        return migration.migrate(src, dst, args.volume_id, args.strategy,
                                 args.rate_limit, timeout_s=args.timeout)
    prepared = migration.prepare(src, dst, args.volume_id, args.strategy,
                                 args.rate_limit)
    mid = prepared['migration_id']
    migration.start(src, dst, mid)
    migration.switchover(src, dst, mid)
    result = migration.status(dst, mid)
    result['hint'] = ('run: fcache migrate %s --from %s --to %s --migration '
                      '%s --phase finish --wait' % (args.volume_id, args.src,
                                                    args.dst, mid))
    return result


def render(result, args):
    return output.format_table(result)
