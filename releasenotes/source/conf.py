# Sphinx configuration of fcache's release notes (tox -e releasenotes).
# reno reads the notes from git history: only committed notes appear.

project = 'fcache Release Notes'
copyright = 'fcache developers'
author = 'fcache developers'

extensions = ['reno.sphinxext']

root_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []
