"""``fcache allocation``: the on-demand cache allocation of the agent.

CloudCache's allocation (doc/operations.rst): each window the agent
measures every volume's reuse working set size (RWSS), predicts the next
one, and gives each volume a share of the cache; a volume beyond its share
gives blocks back at replacement time, up to its limit.  Blocks not yet
admitted wait in the volume's in-memory staging area.
"""

from nova_ext.commands import output

# Column headers of the human table, in order.
COLUMNS = ('volume', 'share', 'used', 'limit', 'rwss_observed',
           'rwss_predicted', 'error', 'staging_used/area', 'staging_hits')


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'allocation', parents=parents,
        help="show each volume's cache share, use and predicted demand",
        description="Show the agent's on-demand cache allocation: the mode "
                    "and window, and for each volume its share, use and "
                    "limit, its observed and predicted reuse working set "
                    "size (RWSS) and the prediction error, and its staging "
                    "area.  RWSS figures are '-' until the first window "
                    "closes.")
    parser.set_defaults(run=run, render=render)


def run(client, args):
    return client.allocation()


def volume_row(volume):
    """One volume's ``allocation`` as the cells of :data:`COLUMNS`."""
    staging = volume.get('staging') or {}
    if staging.get('area_bytes') is None:
        staged = '-'
    else:
        staged = '%s/%s' % (output.format_bytes(staging.get('used_bytes')),
                            output.format_bytes(staging.get('area_bytes')))
    hits = staging.get('data_hits')
    return [output.format_value('id', volume.get('id',
                                                 volume.get('volume_id'))),
            output.format_bytes(volume.get('share_bytes')),
            output.format_bytes(volume.get('used_bytes')),
            output.format_bytes(volume.get('limit_bytes')),
            output.format_bytes(volume.get('rwss_observed_bytes')),
            output.format_bytes(volume.get('rwss_predicted_bytes')),
            output.format_ratio(volume.get('prediction_error')),
            staged,
            output.format_value('data_hits', hits)]


def render(result, args):
    """The allocation settings, then one table row per volume."""
    settings = dict((k, v) for k, v in result.items() if k != 'volumes')
    text = output.format_table(settings)
    volumes = result.get('volumes') or []
    if not volumes:
        return text + 'no volumes\n'
    rows = [volume_row(v if isinstance(v, dict) else {'id': v})
            for v in volumes]
    return text + '\n' + output.format_grid(COLUMNS, rows)
