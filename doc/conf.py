# SPDX-License-Identifier: Apache-2.0
# Sphinx configuration of fcache's documentation (tox -e docs).
import importlib.util
import os
import subprocess
import sys

# nova_ext and the entry points come from the installed (editable)
# package, as in tox's docs environment.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '_ext'))

_spec = importlib.util.spec_from_file_location(
    'fcache_man_conf', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    'cli', 'conf.py'))
_man_conf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_man_conf)

project = 'fcache'
copyright = 'fcache developers'
author = 'fcache developers'

extensions = [
    'sphinx.ext.graphviz',
    'oslo_config.sphinxext',
    'fcache_docs',
]

root_doc = 'index'
# cli/manpages.rst is the root of the man-only build (doc/cli/conf.py).
exclude_patterns = ['_ext', 'build', 'cli/manpages.rst']
# The docs live beside code and other trees: only our .rst pages.
source_suffix = {'.rst': 'restructuredtext'}
pygments_style = 'sphinx'
graphviz_output_format = 'svg'

html_theme = 'alabaster'
html_static_path = []

# (source, name, description, authors, section): doc/cli/conf.py's list,
# which also builds the man pages alone for `make install` and packages.
man_pages = [('cli/' + source,) + tuple(rest)
             for source, *rest in _man_conf.MAN_PAGES]
man_show_urls = False
# man8/fcache-agent.8: a tree man -M and MANPATH can use.
man_make_section_directory = True


# The one version of fcache, the one every program prints with --version:
# pbr's, from the git tag (tools/version.sh).
version = release = subprocess.run(
    [os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                  'tools', 'version.sh')],
    stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
