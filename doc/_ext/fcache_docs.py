# SPDX-License-Identifier: Apache-2.0
"""Sphinx directives that generate fcache's reference pages from the code.

``.. fcache-agent-keys::``
    Every key of the agent's configuration file, from the commented
    sample etc/fcache/agent.conf.sample (its description, default and
    example), checked against the keys the built agent itself accepts: a
    key one has and the other lacks is a build warning, so with ``-W`` the
    page cannot drift from the code.

``.. fcache-cli::``
    Every command of the ``fcache`` command line with its usage and
    options, from the argparse parser of :mod:`nova_ext.cli`.

``.. fcache-control-arguments::``
    Every control operation's arguments, from nova_ext.control_schema
    (the agent's own table, copied by tools/gen-control-schema.py, whose
    copy CI holds equal to the agent's).
"""

import os
import re
import subprocess
import tempfile

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util import logging

LOG = logging.getLogger(__name__)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SAMPLE = os.path.join(REPO, 'etc', 'fcache', 'agent.conf.sample')
AGENT = os.path.join(REPO, 'fcache_agent', 'build', 'fcache-agent')
KEY_LINE = re.compile(r'^#([a-z_]+) =(.*)$')
# The agent's own answer to an unknown key lists those it knows.
KNOWN = re.compile(r'unknown key; known keys: (.*)$', re.M)


def sample_keys(path=SAMPLE):
    """[(key, default, description lines)] in the sample's order.

    A key's description is the comment paragraph just above its
    ``#key = value`` line; keys on consecutive lines share it.
    """
    keys = []
    seen = set()
    paragraph = []
    with open(path) as f:
        body = f.read().split('[agent]', 1)[1]
    for line in body.splitlines():
        match = KEY_LINE.match(line)
        if match:
            key, default = match.group(1), match.group(2).strip()
            if key not in seen:
                seen.add(key)
                keys.append((key, default, paragraph))
        elif line.startswith('#'):
            if keys and paragraph is keys[-1][2]:
                paragraph = []
            paragraph.append(line[1:].strip())
        else:
            paragraph = []
    return keys


def agent_keys(agent=AGENT):
    """The keys the built agent accepts, from its own error message."""
    with tempfile.NamedTemporaryFile('w', suffix='.conf') as conf:
        conf.write('[agent]\nno_such_key_for_the_docs = 1\n')
        conf.flush()
        result = subprocess.run([agent, '--config', conf.name],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                universal_newlines=True, timeout=30)
    match = KNOWN.search(result.stderr)
    if not match:
        raise RuntimeError('%s did not list its keys: %r'
                           % (agent, result.stderr))
    return [k.strip() for k in match.group(1).split(',')]


class AgentKeysDirective(Directive):

    has_content = False

    def run(self):
        env = self.state.document.settings.env
        env.note_dependency(SAMPLE)
        keys = sample_keys()
        if not os.access(AGENT, os.X_OK):
            LOG.warning('%s is not built, so the agent keys cannot be '
                        'checked: run make -C fcache_agent', AGENT,
                        location=(env.docname, self.lineno))
        else:
            known = agent_keys()
            documented = [k for k, _, _ in keys]
            for key in sorted(set(known) - set(documented)):
                LOG.warning('agent key %s is not in %s', key, SAMPLE,
                            location=(env.docname, self.lineno))
            for key in sorted(set(documented) - set(known)):
                LOG.warning('%s documents %s, which the agent refuses',
                            SAMPLE, key, location=(env.docname, self.lineno))
        lines = []
        previous = (None, None)
        for key, default, paragraph in keys:
            lines.append('``%s``' % key)
            if paragraph is previous[1]:
                text = 'See ``%s``.' % previous[0]
            else:
                text = ' '.join(paragraph) or 'No description in the sample.'
                previous = (key, paragraph)
            lines.append('   %s' % text.replace('*', r'\*'))
            lines.append('')
            lines.append('   Default: %s' % (('``%s``' % default)
                                             if default else '(empty)'))
            lines.append('')
        node = nodes.section()
        node.document = self.state.document
        self.state.nested_parse(StringList(lines, source=SAMPLE), 0, node)
        return node.children


# The output options every listing and show has (nova_ext.commands.output)
# are described once, in the man page's "Output formats".
FORMATTER_GROUPS = ('output formatters', 'table formatter', 'json formatter',
                    'CSV Formatter')


def _options(parser):
    shared = set()
    for group in parser._action_groups:
        if group.title in FORMATTER_GROUPS:
            shared.update(id(a) for a in group._group_actions)
    for action in parser._actions:
        if action.help == '==SUPPRESS==' or action.dest == 'help':
            continue
        if id(action) in shared:
            continue
        yield action


def _has_formats(parser):
    return any(group.title == 'output formatters'
               for group in parser._action_groups)


class CliDirective(Directive):

    has_content = False

    def run(self):
        from nova_ext import cli
        parser = cli.build_parser(environ={})
        parser.prog = 'fcache'
        lines = []
        sub = [a for a in parser._actions
               if a.__class__.__name__ == '_SubParsersAction'][0]
        for name, command in sub.choices.items():
            command.prog = 'fcache %s' % name
            usage = ' '.join(command.format_usage().split())
            usage = usage.replace('usage: ', '', 1)
            lines += [name, '-' * len(name), '', '::', '',
                      '   ' + usage, '', command.description or '', '']
            for action in _options(command):
                label = ', '.join(action.option_strings) or action.metavar \
                    or action.dest
                if action.option_strings and action.nargs != 0:
                    if action.choices and not action.metavar:
                        label += ' {%s}' % ','.join(action.choices)
                    else:
                        label += ' ' + (action.metavar or
                                        action.dest.upper())
                lines += ['``%s``' % label,
                          '   %s' % (action.help or '').replace('%%', '%'),
                          '']
            if _has_formats(command):
                lines += ['``-f``, ``-c``%s, ``--max-width``, ... ' % (
                    ', ``--long``' if any(a.dest == 'long' for a in
                                          command._actions) else ''),
                          '   See "Output formats".', '']
            if command.epilog:
                lines += ['::', ''] + ['   ' + line if line else ''
                                       for line in
                                       command.epilog.splitlines()] + ['']
        node = nodes.section()
        node.document = self.state.document
        # Each command is a subsection of the page's section.
        self.state.nested_parse(StringList(lines, source='nova_ext.cli'),
                                0, node, match_titles=True)
        return node.children


def _argument_kind(arg):
    if arg['type'] in ('integer', 'integer list'):
        return '%s, %d to %d' % (arg['type'], arg['min'], arg['max'])
    return arg['type']


class ControlArgumentsDirective(Directive):

    has_content = False

    def run(self):
        from nova_ext import control_schema
        lines = []
        for op, entry in sorted(control_schema.OPERATIONS.items()):
            lines += ['``%s`` (%s)' % (op, entry['access'])]
            if not entry['arguments']:
                lines += ['   No arguments.', '']
                continue
            lines += ['']
            for name, arg in sorted(entry['arguments'].items(),
                                    key=lambda i: (not i[1]['required'],
                                                   i[0])):
                lines += ['   ``%s`` (%s%s)' % (
                    name, _argument_kind(arg),
                    ', required' if arg['required'] else ''),
                    '      %s' % arg['help'].replace('*', r'\*'), '']
        node = nodes.section()
        node.document = self.state.document
        self.state.nested_parse(StringList(lines,
                                           source='nova_ext.control_schema'),
                                0, node)
        return node.children


def setup(app):
    app.add_directive('fcache-agent-keys', AgentKeysDirective)
    app.add_directive('fcache-cli', CliDirective)
    app.add_directive('fcache-control-arguments', ControlArgumentsDirective)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
