# Sphinx configuration of fcache's documentation (tox -e docs).
import os
import sys

# nova_ext and the entry points come from the installed (editable)
# package, as in tox's docs environment.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '_ext'))

project = 'fcache'
copyright = 'fcache developers'
author = 'fcache developers'

extensions = [
    'sphinx.ext.graphviz',
    'oslo_config.sphinxext',
    'fcache_docs',
]

root_doc = 'index'
exclude_patterns = ['_ext', 'build']
# The docs live beside code and other trees: only our .rst pages.
source_suffix = {'.rst': 'restructuredtext'}
pygments_style = 'sphinx'
graphviz_output_format = 'svg'

html_theme = 'alabaster'
html_static_path = []

# (source, name, description, authors, section)
man_pages = [
    ('man/fcache-agent', 'fcache-agent',
     'per-host data-plane daemon of the fcache flash cache',
     [author], 8),
    ('man/fcache', 'fcache',
     'drive the fcache agent of this host',
     [author], 1),
]
man_show_urls = False
# man8/fcache-agent.8: a tree man -M and MANPATH can use.
man_make_section_directory = True
