# SPDX-License-Identifier: Apache-2.0
"""``fcache volume-move*``: move a volume's origin to other storage, live.

::

    fcache volume-move ID --to ORIGIN --scheme lr --wait
    fcache volume-move ID --to ORIGIN --scheme auto \\
        --from-medium ssd --to-medium hdd --wear-weight 0.8 --wait --json
    fcache volume-move-status ID
    fcache volume-move-abort ID

``auto`` is resolved here, before the request, with the metric of
:mod:`nova_ext.movecost` (doc/reference/storage-migration-nova.rst).  With
``--wait`` the command follows the move: a bar on a terminal, one line per
poll otherwise, one JSON object per line with ``--json`` (the last one is
the final status).
"""

import argparse
import sys

from nova_ext import agent
from nova_ext.commands import output
from nova_ext.commands import progress
from nova_ext import exception
from nova_ext import movecost
from nova_ext import volume_move


def _positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError('not a number: %r' % text)
        if not value > 0:
            raise argparse.ArgumentTypeError('must be positive: %r' % text)
        return value
    return parse


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('not a number: %r' % text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError('must be from 0 to 1: %r' % text)
    return value


def _media_options(parser):
    parser.add_argument('--from-medium', choices=movecost.MEDIA,
                        default='ssd',
                        help='medium of the current origin (default ssd)')
    parser.add_argument('--to-medium', choices=movecost.MEDIA,
                        default='ssd',
                        help='medium of the new origin (default ssd)')
    parser.add_argument('--wear-weight', type=_fraction, default=0.5,
                        metavar='GAMMA',
                        help='weight of SSD wear against I/O performance in '
                             "the migration cost, 0..1 (the volume type's "
                             'fcache:wear_weight; default 0.5)')


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'volume-move', parents=parents,
        help="move a volume's origin to other storage while it is in use",
        description="Copy the volume's origin to ORIGIN while the VM uses "
                    "it, then serve the same export from ORIGIN.  --scheme "
                    "auto picks the scheme of lowest expected migration "
                    "cost between the two media for the wear weight.")
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    parser.add_argument('--to', required=True, metavar='ORIGIN',
                        help='the new origin: block device or file path, '
                             'or an nbd:// / nbd+unix:// URI')
    parser.add_argument('--scheme', choices=volume_move.SCHEMES,
                        default='auto',
                        help='dbt, mirror, lr, slr, aio, dbt_capped, or '
                             'auto (default; never dbt_capped)')
    _media_options(parser)
    parser.add_argument('--write-rate', type=_positive(float),
                        metavar='MBPS',
                        help="auto: the VM's writes in MB/s (default %d)"
                        % (volume_move.DEFAULT_WRITE_BPS // 10 ** 6))
    parser.add_argument('--read-rate', type=_positive(float),
                        metavar='MBPS',
                        help="auto: the VM's reads in MB/s (default three "
                             "times the writes)")
    parser.add_argument('--in-flight', type=_positive(int), metavar='N',
                        help="auto: the VM's requests in flight (default "
                             "%d)" % volume_move.DEFAULT_DEPTH)
    parser.add_argument('--ssd-mbps', type=_positive(float), metavar='MBPS',
                        help='auto: streaming bandwidth of an SSD volume '
                             '(default 180)')
    parser.add_argument('--hdd-mbps', type=_positive(float), metavar='MBPS',
                        help='auto: streaming bandwidth of an HDD volume '
                             '(default 95)')
    parser.add_argument('--rate-limit', type=_positive(int),
                        metavar='MBPS',
                        help='cap the copy at MBPS MB/s (an integer)')
    parser.add_argument('--max-rounds', type=_positive(int), metavar='N',
                        help='dbt: copy rounds before it pauses anyway; '
                             'dbt_capped: before giving up')
    parser.add_argument('--converge-bytes', type=_positive(int),
                        metavar='N',
                        help='dbt_capped: dirty bytes to copy with the '
                             'volume paused')
    parser.add_argument('--downtime-ms', type=_positive(int), metavar='MS',
                        help='dbt_capped: the longest pause of its last '
                             'round (default 200)')
    parser.add_argument('--aio-threshold', type=_positive(int), metavar='N',
                        help='aio: pending duplicate writes before a write '
                             'is delayed')
    parser.add_argument('--aio-delay-us', type=_positive(int), metavar='US',
                        help='aio: how long such a write is delayed')
    parser.add_argument('--wait', action='store_true',
                        help='follow the move until it is done')
    parser.add_argument('--timeout', type=_positive(float), default=3600.0,
                        metavar='S',
                        help='how long --wait may take (default 3600); the '
                             'move goes on after it')
    parser.add_argument('--interval', type=_positive(float),
                        default=volume_move.DEFAULT_POLL_S, metavar='S',
                        help='seconds between polls with --wait (default 1)')
    output.add_format_options(parser)
    parser.set_defaults(run=run_move, render=render_status, json_lines=True)

    parser = subparsers.add_parser(
        'volume-move-status', parents=parents,
        help="show the progress of a volume's storage move",
        description="Show the progress of a volume's storage move: bytes "
                    "copied, rounds, ETA, I/O on the old (a_*) and new "
                    "(b_*) origin.  With --baseline-copy-s, a finished "
                    "move's measured migration cost (cost.*).")
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    parser.add_argument('--baseline-copy-s', type=_positive(float),
                        metavar='S',
                        help='seconds a plain copy of the idle image takes '
                             'between the same media')
    parser.add_argument('--best-io', type=_positive(float), metavar='MBPS',
                        help="the VM's I/O throughput on the faster medium "
                             'with no move running, for lambda_io')
    _media_options(parser)
    output.add_format_options(parser)
    parser.set_defaults(run=run_status, render=render_status)

    parser = subparsers.add_parser(
        'volume-move-abort', parents=parents,
        help="stop a volume's storage move",
        description="Stop a volume's storage move; the old origin keeps "
                    "serving the volume.")
    parser.add_argument('volume_id', metavar='ID', help='volume id')
    output.add_format_options(parser)
    parser.set_defaults(run=run_abort, render=render_abort)


def _workload(args):
    return volume_move.assumed_workload(args.write_rate, args.read_rate,
                                        args.ssd_mbps, args.hdd_mbps,
                                        args.in_flight)


def run_move(client, args):
    # auto chooses among the schemes the agent's engine runs, as its
    # capabilities list them, and another is refused here, saying which
    # it runs (an agent too old to list them refuses it itself).
    scheme, auto = volume_move.resolve_scheme(
        args.scheme, args.from_medium, args.to_medium, args.wear_weight,
        _workload(args), volume_move.agent_schemes(client),
        'the agent at %s' % client.socket_path)
    result = client.move_volume(args.volume_id, args.to, scheme=scheme,
                                max_rounds=args.max_rounds,
                                converge_bytes=args.converge_bytes,
                                downtime_ms=args.downtime_ms,
                                aio_threshold=args.aio_threshold,
                                aio_delay_us=args.aio_delay_us,
                                rate_limit_mbps=args.rate_limit)
    if args.wait:
        # JSON lines go to stdout, the last one the final status; a person
        # reads the progress on stderr, stdout keeping only the result.
        display = progress.Progress(sys.stdout if args.json else sys.stderr,
                                    as_json=args.json)
        try:
            result = volume_move.wait(client, args.volume_id, args.to,
                                      args.timeout, poll_s=args.interval,
                                      progress=MoveProgress(display))
        finally:
            display.close()
    if auto is not None:
        result = dict(result, auto=auto)
    return result


def run_status(client, args):
    status = client.move_status(args.volume_id)
    if args.baseline_copy_s and status.get('state') == 'done':
        best = args.best_io * 1e6 if args.best_io else None
        try:
            cost = movecost.measured_cost(
                status, args.baseline_copy_s, args.from_medium,
                args.to_medium, args.wear_weight, best_io_bps=best)
        except ValueError as exc:
            raise exception.InvalidArgument(name='status',
                                            value=args.volume_id,
                                            reason=str(exc))
        status = dict(status, cost=cost.as_dict())
    return status


def run_abort(client, args):
    return client.abort_move(args.volume_id)


def progress_parts(status):
    """A move's status as the progress display's phase, counts, detail."""
    phase = '%s %s' % (status.get('scheme') or '-',
                       status.get('state') or '-')
    detail = []
    if status.get('rounds') is not None:
        detail.append('round %s' % status['rounds'])
    if status.get('dirty_bytes'):
        detail.append('%s dirty' % output.format_bytes(status['dirty_bytes']))
    eta = status.get('eta_s')
    if eta is not None and status.get('state') == 'copying':
        detail.append('ETA %s' % format_seconds(eta))
    if status.get('downtime_ms') is not None:
        detail.append('downtime %s ms' % status['downtime_ms'])
    copied = status.get('bytes_copied') or 0
    total = status.get('bytes_total')
    if status.get('state') == 'done' and total:
        copied = max(copied, total)
    return phase, copied, total, ', '.join(detail)


def progress_line(status):
    """One line of a move's progress: state, bytes, rounds, ETA."""
    return progress.format_line(*progress_parts(status))


def format_seconds(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return '%d s' % seconds
    if seconds < 3600:
        return '%d min %02d s' % divmod(seconds, 60)
    hours, rest = divmod(seconds, 3600)
    return '%d h %02d min' % (hours, rest // 60)


class MoveProgress(object):
    """``volume_move.wait``'s progress callback: each polled status shown."""

    def __init__(self, display):
        self.display = display

    def __call__(self, status):
        phase, done, total, detail = progress_parts(status)
        self.display.update(phase, done, total, detail, record=status)


# Fields of a move's status shown first, in this order.
STATUS_ORDER = ('volume_id', 'scheme', 'state', 'bytes_copied', 'bytes_total',
                'rounds', 'dirty_bytes', 'eta_s', 'downtime_ms', 'error')


def render_status(result, args):
    """The status as one record.

    A table starts with the progress line and ends with the expected costs
    behind ``auto``.
    """
    if args.format != 'table':
        return output.format_one(args, result, STATUS_ORDER)
    text = ''
    if result.get('state') in agent.MOVE_STATES and 'bytes_total' in result:
        text = progress_line(result) + '\n'
    rest = dict((k, v) for k, v in result.items() if k != 'auto')
    text += output.format_one(args, rest, STATUS_ORDER)
    auto = result.get('auto')
    if auto:
        text += render_auto(auto)
    return text


def render_auto(auto):
    """The expected costs behind ``auto``, one row per scheme."""
    head = ('auto: %s (from %s to %s, wear weight %s)\n' % (
        auto['chosen'], auto['from_medium'], auto['to_medium'],
        auto['wear_weight']))
    rows = [{'scheme': c['scheme'] + (' *' if c['scheme'] == auto['chosen']
                                      else ''),
             'lambda_time': _fmt(c['lambda_time']),
             'lambda_io': _fmt(c['lambda_io']),
             'lambda_wear': _fmt(c['lambda_wear']),
             'expected_mc': _fmt(c['mc'])}
            for c in auto['expected']]
    return head + output.table_list(
        rows, ('scheme', 'lambda_time', 'lambda_io', 'lambda_wear',
               'expected_mc'))


def _fmt(value):
    if value is None:
        return '-'
    return '%.3f' % value


def render_abort(result, args):
    text = output.format_one(args, result)
    if args.format == 'table':
        text = ('storage move of volume %s aborted; the old origin keeps '
                'serving it\n' % args.volume_id) + text
    return text
