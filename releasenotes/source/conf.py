# SPDX-License-Identifier: Apache-2.0
# Sphinx configuration of fcache's release notes (tox -e releasenotes).
# reno reads the notes from git history: only committed notes appear.
import os
import subprocess

from docutils import nodes

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


# reno titles the notes not yet under a tag with git describe's version
# ("1.2.0-5"), or "0.0.0" while the repository has no tag at all.
# unreleased.rst replaces the first with @FCACHE_VERSION@; the second is
# renamed once reno has built the page.  Both become the version above.
def _version_title(app, docname, source):
    source[0] = source[0].replace('@FCACHE_VERSION@', version)


def _untagged_title(app, doctree):
    for title in doctree.findall(nodes.title):
        if title.astext() == '0.0.0':
            title.children = [nodes.Text(version)]


def setup(app):
    app.connect('source-read', _version_title)
    app.connect('doctree-read', _untagged_title)
