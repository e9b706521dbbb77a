# SPDX-License-Identifier: Apache-2.0
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
is settled, from either host with that host's agent alone (it settles with
its peer agent itself), or with both sockets for a migration whose peer
agent predates that (``--source-lost`` when the source host is gone for
good)::

    fcache migrate VOL --from A --migration MID --phase settle
    fcache migrate VOL --to B --migration MID --phase settle
    fcache migrate VOL --from A --to B --migration MID --phase settle
    fcache migrate VOL --to B --migration MID --phase settle --source-lost
"""

import argparse
import sys
import textwrap

from nova_ext import agent
from nova_ext.commands import output
from nova_ext.commands import progress
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


PHASES_HELP = """\
phases (--phase; without it every phase runs in order):
  prepare     the destination agent takes the volume and opens an export
              for the VM there; prints the migration id (MID) the other
              phases need as --migration
  start       the source agent connects to the destination and begins the
              warm-up: firepan copies the whole cache now, the VM paused
              (--wait shows the bytes copied); the other strategies warm
              the destination in the background or on demand
              (doc/reference/migration.rst)
  switchover  the VM runs on the destination from now on: the source stops
              writing, and the destination fetches on demand what has not
              arrived
  finish      (with --wait) wait until the destination holds every block it
              needs, then release the source's cache; without --wait, the
              destination's status
  abort       before the switchover: the destination forgets the volume, the
              source keeps it as it was
  settle      after a failure past the switchover both agents hold the
              volume; give it back to the destination, the source writing
              back what only it has.  Run it on either host with only that
              host's socket (--from on the source, --to on the
              destination): that agent settles with its peer over the
              peer's migration listener, even if either restarted.  With
              both --from and --to the steps are relayed between the two
              sockets instead: needed only when one agent predates
              settling through the agents (the other says so).
              --source-lost: the source host is gone for good; the
              destination gives up the blocks only it had (only --to).

examples:
  fcache migrate VOL --from A.sock --to B.sock --wait
  fcache migrate VOL --from A --to B --strategy hybrid --phase prepare
  fcache migrate VOL --from A --to B --migration MID --phase start
  fcache migrate VOL --from A --to B --migration MID --phase switchover
  fcache migrate VOL --from A --to B --migration MID --phase finish --wait
  fcache migrate VOL --to B --migration MID --phase settle
  fcache migrate VOL --from A --migration MID --phase settle
  fcache migrate VOL --to B --migration MID --phase settle --source-lost
"""


def _positive_seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('not a number of seconds: %r'
                                         % text)
    if not value > 0:
        raise argparse.ArgumentTypeError('must be positive: %r' % text)
    return value


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'migrate', parents=parents,
        help="move a volume's cache to another host's agent",
        # The raw formatter keeps the phases' layout; wrap this by hand.
        description=textwrap.fill(
            "Move a volume's cache from the agent at --from to the agent "
            "at --to with a warm-up strategy.  With --wait a progress "
            "display follows the copy on stderr (JSON lines with --json); "
            "stdout has the result only."),
        epilog=PHASES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    # Checked in check_args: settling needs only one of them.
    parser.add_argument('--from', dest='src', metavar='SOCK',
                        help="source agent's control socket (required, but "
                             "with --phase settle)")
    parser.add_argument('--to', dest='dst', metavar='SOCK',
                        help="destination agent's control socket "
                             "(required, but with --phase settle)")
    parser.add_argument('--strategy', choices=migration.STRATEGIES,
                        default='auto', help='warm-up strategy (default auto)')
    parser.add_argument('--rate-limit', type=_mbps, metavar='MBPS',
                        help='cap the transfer at MBPS megabytes per second '
                             '(background and on-demand together)')
    parser.add_argument('--phase', choices=migration.PHASES,
                        help='run one phase only (see "phases" below)')
    parser.add_argument('--migration', metavar='MID',
                        help='migration id printed by --phase prepare '
                             '(required by every other phase)')
    parser.add_argument('--wait', action='store_true',
                        help='wait until the migration completes, showing '
                             'its progress (without --phase, or with '
                             '--phase finish)')
    parser.add_argument('--source-lost', action='store_true',
                        help='with --phase settle: the source is gone for '
                             'good; give up the blocks only it had')
    parser.add_argument('--timeout', type=_positive_seconds, default=600.0,
                        metavar='S',
                        help='how long --wait may take (default 600)')
    output.add_format_options(parser)
    parser.set_defaults(run=run, render=render)


def check_args(args):
    """Refuse a combination of options that would be ignored or fail."""
    settle = args.phase == 'settle'
    if settle and args.source_lost and not args.dst:
        raise exception.MissingArgument(
            name='--to SOCK',
            reason="--source-lost is done by the destination agent: its "
                   "control socket")
    if settle and not (args.src or args.dst):
        raise exception.MissingArgument(
            name='--from SOCK or --to SOCK',
            reason="the control socket of the agent on this host (the "
                   "source's or the destination's): it settles with its "
                   "peer agent itself")
    if not settle and not args.src:
        raise exception.MissingArgument(
            name='--from SOCK',
            reason="the source agent's control socket (only --phase settle "
                   "goes without)")
    if not settle and not args.dst:
        raise exception.MissingArgument(
            name='--to SOCK',
            reason="the destination agent's control socket (only --phase "
                   "settle goes without)")
    if args.src and args.src == args.dst:
        raise exception.InvalidArgument(
            name='--to', value=args.dst,
            reason='the destination must be another agent than --from')
    if args.phase and args.phase != 'prepare' and not args.migration:
        raise exception.MissingArgument(
            name='--migration MID',
            reason='--phase %s needs the migration id printed by --phase '
                   'prepare' % args.phase)
    if args.migration and not args.phase:
        raise exception.InvalidArgument(
            name='--migration', value=args.migration,
            reason='goes with --phase; without --phase a new migration '
                   'starts and gets its own id')
    if args.wait and args.phase not in (None, 'finish'):
        raise exception.InvalidArgument(
            name='--wait', value=True,
            reason='goes with --phase finish or no --phase, not with '
                   '--phase %s' % args.phase)
    if args.source_lost and args.phase != 'settle':
        raise exception.InvalidArgument(
            name='--source-lost', value=True,
            reason='goes with --phase settle only')
    if args.rate_limit and args.phase not in (None, 'prepare'):
        raise exception.InvalidArgument(
            name='--rate-limit', value=args.rate_limit,
            reason='is set when the migration is prepared (--phase '
                   'prepare, or no --phase)')


class MigrationProgress(object):
    """``migration.migrate``'s progress callback, on a shared display."""

    def __init__(self, display):
        self.display = display

    def __call__(self, phase, status):
        status = status or {}
        detail = []
        if status.get('state'):
            detail.append(status['state'])
        rate = status.get('rate_bytes_per_s')
        if rate:
            detail.append(output.human('rate_bytes_per_s', rate))
        if status.get('eta_s') and status.get('state') != 'completed':
            detail.append('ETA %.0f s' % status['eta_s'])
        record = dict(status, phase=phase)
        self.display.update(phase, status.get('bytes_done'),
                            status.get('bytes_total'), ', '.join(detail),
                            record=record)


def run(client, args):
    check_args(args)
    src = agent.AgentClient(args.src) if args.src else None
    dst = agent.AgentClient(args.dst) if args.dst else None
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
        return _with_progress(args, lambda show: migration.finish(
            src, dst, args.migration, timeout_s=args.timeout,
            progress=show))
    if args.phase == 'abort':
        return migration.abort(src, dst, args.migration)
    if args.phase == 'settle':
        if args.source_lost or (src and dst):
            return migration.settle(src, dst, args.migration,
                                    args.volume_id,
                                    source_lost=args.source_lost)
        return migration.settle_through(src or dst, args.migration,
                                        args.volume_id)
    if args.wait:
        return _with_progress(args, lambda show: migration.migrate(
            src, dst, args.volume_id, args.strategy, args.rate_limit,
            timeout_s=args.timeout, progress=show))
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


def _with_progress(args, call):
    # The progress on stderr (JSON lines with --json, as evacuate's):
    # stdout keeps only the result, one JSON object for the scripts that
    # read "fcache migrate --wait --json".
    display = progress.Progress(sys.stderr, as_json=args.json)
    try:
        return call(MigrationProgress(display))
    finally:
        display.close()


# The fields of a migration's result shown first.
ORDER = ('migration_id', 'volume_id', 'strategy', 'state', 'reason',
         'bytes_transferred', 'blocks_transferred', 'duration_s',
         'downtime_s', 'hint')


def render(result, args):
    return output.format_one(args, result, ORDER)
