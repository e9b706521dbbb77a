# SPDX-License-Identifier: Apache-2.0
"""``fcache capabilities``: what this host's agent can run."""

from nova_ext.commands import output


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'capabilities', parents=parents,
        help='list the strategies this agent runs, and why not where not',
        description='List the cache migration strategies, one per row, with '
                    'whether this agent\'s engine runs each and, where it '
                    'does not, why (the control operation "capabilities" '
                    'also gives the write policies, admissions, staging '
                    'kinds and storage move schemes the agent takes and the '
                    'bounds it enforces).')
    output.add_format_options(parser, listing=True)
    parser.set_defaults(run=run, render=render)


def run(client, args):
    return client.capabilities()


def render(result, args):
    rows = [dict(s, engine=result['engine']) for s in result['strategies']]
    return output.format_list(args, rows,
                              ('name', 'supported', 'summary', 'why_not'),
                              long=('engine',))
