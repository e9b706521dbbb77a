# SPDX-License-Identifier: Apache-2.0
"""The cloud in a box (tools/cloud.sh), as the tests here see it.

These tests run only against a box that is up (tools/run-tests.sh brings
one up, runs them and the Tempest scenarios, and takes it down): they go
through the services' APIs as a user would, and reach behind them only to
stop and start a host's fcache-agent.
"""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'tools'))

from cloudbox import catalog  # noqa: E402
from cloudbox import layout  # noqa: E402
from cloudbox import procs  # noqa: E402


@pytest.fixture(scope='session')
def box():
    b = layout.Box(layout.default_dir())
    if not procs.pid_of(b, 'nova-api'):
        raise AssertionError('no cloud box runs in %s: start it with '
                             'tools/cloud.sh up' % b.dir)
    return b


@pytest.fixture(scope='session')
def conn(box):
    return catalog.connect(box)
