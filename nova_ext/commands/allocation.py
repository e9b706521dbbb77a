# SPDX-License-Identifier: Apache-2.0
"""``fcache allocation``: the on-demand cache allocation of the agent.

CloudCache's allocation (doc/admin/operations.rst): each window the agent
measures every volume's reuse working set size (RWSS), predicts the next
one, and gives each volume a share of the cache; a volume beyond its share
gives blocks back at replacement time, up to its limit.  Blocks not yet
admitted wait in the volume's in-memory staging area.
"""

from nova_ext.commands import output

# Columns shown without --long, in order; the table fits 120 characters.
# (a volume id is 36).
COLUMNS = ('id', 'share_bytes', 'used_bytes', 'limit_bytes',
           'rwss_predicted_bytes')
# With --long, in this order: the observed demand, the window (and whether
# it is chosen at the knee: allocation_window = auto), the staging area (and
# the reuse history beneath it) and the demand tracker too.
LONG_COLUMNS = ('rwss_observed_bytes', 'prediction_error', 'window_s',
                'window_auto', 'window_at_knee',
                'rws_n', 'windows', 'taken_blocks',
                'given_blocks', 'staging.kind', 'staging.used_bytes',
                'staging.area_bytes', 'staging.data_hits',
                'staging.admitted', 'staging.evicted', 'staging.addresses',
                'staging.data_blocks', 'staging.recalled',
                'staging.history_blocks', 'staging.history_bytes',
                'tracker.memory_bytes',
                'tracker.sample_rate', 'tracker.knee_memory_bytes',
                'rwss_by_n_bytes')


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'allocation', parents=parents,
        help="show each volume's cache share, use and predicted demand",
        description="Show the agent's on-demand cache allocation: the mode "
                    "and window, and for each volume its share, use and "
                    "limit, its observed and predicted reuse working set "
                    "size (RWSS) and the prediction error, and (--long) its "
                    "staging area.  RWSS figures are '-' until the first "
                    "window closes.  A table starts with the settings; the "
                    "other formats give the volumes' rows only (--json: "
                    "the whole answer).")
    output.add_format_options(parser, listing=True)
    parser.set_defaults(run=run, render=render)


def run(client, args):
    return client.allocation()


def render(result, args):
    """One row per volume; a table starts with the allocation settings."""
    volumes = [v if isinstance(v, dict) else {'id': v}
               for v in result.get('volumes') or []]
    for volume in volumes:
        # An older agent named the volume volume_id.
        if 'id' not in volume and 'volume_id' in volume:
            volume['id'] = volume['volume_id']
    text = output.format_list(args, volumes, COLUMNS, LONG_COLUMNS)
    if args.format == 'table':
        settings = dict((k, v) for k, v in result.items() if k != 'volumes')
        text = output.table_text(settings) + (text or 'no volumes\n')
    return text
