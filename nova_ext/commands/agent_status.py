# SPDX-License-Identifier: Apache-2.0
"""``fcache agent-status``: what the agent is and holds."""

from nova_ext.commands import output


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'agent-status', parents=parents,
        help='show the agent version, engine, cache capacity and volumes',
        description='Show the agent version, engine, cache capacity and use, '
                    'the attached volumes, and the allocation summary '
                    '(allocation.*: mode, spare capacity, window, headroom; '
                    '"fcache allocation" shows each volume\'s share).')
    output.add_format_options(parser)
    parser.set_defaults(run=run, render=render)


def run(client, args):
    return client.status()


def render(result, args):
    # The volumes (and the allocation's) are shown by id: "fcache
    # volume-list" and "fcache allocation" have their figures.
    return output.format_one(args, result)
