# SPDX-License-Identifier: Apache-2.0
# The man pages alone (sphinx-build -b man doc/cli DIR): what
# `make -C fcache_agent install` and the Debian packages build, with no
# more than Sphinx, the built agent and nova_ext's parser.  doc/conf.py
# takes MAN_PAGES from here for the whole documentation's man builder.
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), '_ext'))
# fcache-cli documents nova_ext.cli's parser: the tree's, not an
# installed copy's.
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

project = 'fcache'
copyright = 'fcache developers'
author = 'fcache developers'

extensions = ['fcache_docs']
# index.rst is the CLI section of the whole documentation (doc/conf.py),
# with links to pages this build does not have.
root_doc = 'manpages'
exclude_patterns = ['index.rst']
source_suffix = {'.rst': 'restructuredtext'}

# (source under doc/cli, name, description, authors, section)
MAN_PAGES = [
    ('fcache-agent', 'fcache-agent',
     'per-host data-plane daemon of the fcache flash cache',
     [author], 8),
    ('fcache', 'fcache',
     'drive the fcache agent of this host',
     [author], 1),
]
man_pages = MAN_PAGES
man_show_urls = False
# man8/fcache-agent.8: a tree man -M and MANPATH can use.
man_make_section_directory = True
