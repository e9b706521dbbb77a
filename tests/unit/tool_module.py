# SPDX-License-Identifier: Apache-2.0
"""A script of tools/ (a file name with a dash, no package) as a module."""

import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def load(name, script):
    """tools/``script`` imported as module ``name``."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(REPO, 'tools', script))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
