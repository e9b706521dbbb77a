# SPDX-License-Identifier: Apache-2.0
"""``fcache metrics`` and ``fcache volume-stats-reset``.

``metrics`` prints the agent's figures in the Prometheus text format, the
same text the agent writes to ``metrics_path`` for node-exporter's
textfile collector (doc/admin/monitoring.rst): for a look by hand, or a
scrape by something that cannot read the file.  ``volume-stats-reset``
zeroes a volume's counters (or, with ``--all``, every volume's and the
host's) and restarts its hit-ratio windows; the reset's time is exposed as
``fcache_volume_stats_reset_timestamp_seconds``.
"""

from nova_ext.commands import output


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'metrics', parents=parents,
        help='print the metrics in the Prometheus text format',
        description="Print the agent's per-volume and per-host metrics in "
                    "the Prometheus text exposition format, sampled now.  "
                    "With --json: {\"content_type\": ..., \"text\": ...}.")
    parser.set_defaults(run=run_metrics, render=render_metrics)

    parser = subparsers.add_parser(
        'volume-stats-reset', parents=parents,
        help="zero a volume's counters (or every volume's)",
        description="Zero the counters of VOLUME_ID, or with --all of every "
                    "volume and the host's totals, and restart the hit-ratio "
                    "windows.  The engines' own figures in volume-show are "
                    "not touched.")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument('volume_id', nargs='?', metavar='VOLUME_ID')
    which.add_argument('--all', action='store_true',
                       help="every volume's counters and the host's")
    parser.set_defaults(run=run_reset, render=render_reset)


def run_metrics(client, args):
    return client.call('metrics')


def render_metrics(result, args):
    return result.get('text', '')


def run_reset(client, args):
    return client.reset_stats(None if args.all else args.volume_id)


def render_reset(result, args):
    return output.format_table(result)
