# SPDX-License-Identifier: Apache-2.0
"""The ``fcache`` command: talk to one fcache agent.

::

    fcache [--socket PATH] [--json] COMMAND [ARGS] [--socket PATH] [--json]

``--socket`` defaults to ``$FCACHE_SOCKET``, else /run/fcache/agent.sock.
``--json`` prints the agent's result object as JSON; otherwise the result
is printed in the format of ``-f`` (a table by default), with the columns
of ``-c`` and ``--long`` (nova_ext.commands.output).  On failure exactly
one line, ``fcache: error: ...``, goes to stderr and the exit status says
what kind of failure it was (see ``EXIT_*``).
"""

import argparse
import json
import os
import sys

from nova_ext import agent
from nova_ext import commands
from nova_ext import exception
from nova_ext import version

PROG = 'fcache'
SOCKET_ENV = 'FCACHE_SOCKET'

EXIT_OK = 0
EXIT_FAILED = 1         # the agent refused or failed the request
EXIT_USAGE = 2          # bad command line (argparse's own status)
EXIT_UNREACHABLE = 3    # no agent at the socket, or it did not answer
EXIT_PROTOCOL = 4       # the agent's answer made no sense
EXIT_INTERRUPTED = 130

EPILOG = ("exit status: 0 success, 1 the agent refused or failed the "
          "request, 2 bad arguments, 3 agent unreachable or timed out, "
          "4 invalid answer from the agent.")


class UsageError(Exception):
    """A command line the parser refuses; the message is one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # argparse would print the usage and exit; report one line instead
        # and name the subcommand when there is one ("fcache volume-show").
        command = self.prog.split(' ', 1)[1:]
        prefix = '%s: ' % command[0] if command else ''
        raise UsageError(prefix + message)


def _global_options(parser, socket_default, json_default):
    parser.add_argument(
        '--socket', metavar='PATH', default=socket_default,
        help='control socket of the agent (default: $%s or %s)' % (
            SOCKET_ENV, agent.DEFAULT_SOCKET))
    parser.add_argument(
        '--json', action='store_true', default=json_default,
        help="print the agent's whole result as JSON (-f json prints "
             "the columns shown)")


def build_parser(environ=None):
    """Return the argument parser of the ``fcache`` command."""
    environ = os.environ if environ is None else environ
    parser = _Parser(
        prog=PROG,
        description='Drive the fcache agent of this host: a flash cache in '
                    'front of Cinder volumes, exported over NBD.',
        epilog=EPILOG)
    _global_options(parser, environ.get(SOCKET_ENV) or agent.DEFAULT_SOCKET,
                    False)
    parser.add_argument('--version', action='version',
                        version=version.version_string())

    # The same options after the command; SUPPRESS keeps a value given
    # before the command unless the command repeats the option.
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, argparse.SUPPRESS, argparse.SUPPRESS)

    subparsers = parser.add_subparsers(dest='command', metavar='COMMAND',
                                       title='commands')
    subparsers.required = True
    for module in commands.COMMAND_MODULES:
        module.register(subparsers, [common])
    return parser


def _as_option(parser, args, exc):
    """``exc``'s message, an API argument named as the command's option.

    The client checks its arguments by their API names (``max_rounds``);
    the operator gave ``--max-rounds``.
    """
    name = exc.kwargs.get('name')
    if not isinstance(name, str) or name.startswith('-'):
        return str(exc)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            command = action.choices.get(args.command)
            break
    else:
        return str(exc)
    wanted = '--' + name.replace('_', '-')
    for action in command._actions:
        if action.dest == name or wanted in action.option_strings:
            option = (max(action.option_strings, key=len)
                      if action.option_strings else action.metavar)
            if option:
                return str(exc).replace('invalid %s ' % name,
                                        'invalid %s ' % option, 1)
    return str(exc)


def _fail(message, status):
    sys.stderr.write('%s: error: %s\n' % (PROG, ' '.join(message.split())))
    return status


def main(argv=None):
    """Run the command line ``argv`` (default: ``sys.argv[1:]``).

    Returns the exit status.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except SystemExit as exc:
        # --help printed its text and asked to exit.
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE

    client = agent.AgentClient(args.socket)
    try:
        result = args.run(client, args)
        if args.json:
            # A command that printed progress as JSON lines ends with one.
            indent = None if getattr(args, 'json_lines', False) else 2
            text = json.dumps(result, indent=indent) + '\n'
        else:
            text = args.render(result, args)
    except exception.InvalidArgument as exc:
        # Like argparse's errors: the command first, the option by the
        # name the operator typed.
        return _fail('%s: %s' % (args.command, _as_option(parser, args, exc)),
                     EXIT_USAGE)
    except (exception.AgentUnreachable, exception.AgentTimeout) as exc:
        return _fail(str(exc), EXIT_UNREACHABLE)
    except exception.ProtocolError as exc:
        return _fail(str(exc), EXIT_PROTOCOL)
    except exception.FcacheException as exc:
        return _fail(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        return _fail('interrupted', EXIT_INTERRUPTED)

    sys.stdout.write(text)
    sys.stdout.flush()
    # A command whose result can be a partial failure says so (evacuate).
    status = getattr(args, 'status', None)
    return status(result) if status else EXIT_OK


if __name__ == '__main__':
    sys.exit(main())
