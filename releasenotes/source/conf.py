# Sphinx configuration of fcache's release notes (tox -e releasenotes).
# reno reads the notes from git history: only committed notes appear.
import os
import subprocess

project = 'fcache Release Notes'
copyright = 'fcache developers'
author = 'fcache developers'

extensions = ['reno.sphinxext']

root_doc = 'index'
exclude_patterns = ['_build']
html_theme = 'alabaster'
html_static_path = []


# The one version of fcache, the one every program prints with --version:
# pbr's, from the git tag (tools/version.sh).
version = release = subprocess.run(
    [os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                  'tools', 'version.sh')],
    stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
