# SPDX-License-Identifier: Apache-2.0
"""Fixtures: the functional tests' agents and origins, two libvirt hosts."""

import os
import shutil
import tempfile

import pytest

# The functional tests' fixtures (real agent with sanitizers, nbdkit
# origins, a kept workdir on failure) serve here unchanged.
from functional.conftest import agent_binary  # noqa: F401
from functional.conftest import make_agent  # noqa: F401
from functional.conftest import make_origin  # noqa: F401
from functional.conftest import pytest_runtest_makereport  # noqa: F401
from functional.conftest import session_dir  # noqa: F401

from . import hosts as hosts_mod


@pytest.fixture
def workdir(request):
    d = tempfile.mkdtemp(prefix='fclv-')
    # QEMU runs as libvirt-qemu: it must reach the export sockets.
    os.chmod(d, 0o711)
    yield d
    failed = any(getattr(request.node, 'rep_' + w, None) is not None and
                 getattr(request.node, 'rep_' + w).failed
                 for w in ('setup', 'call'))
    if failed or os.environ.get('FCACHE_KEEP_TMP'):
        print('libvirt test files kept in %s' % d)
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope='session')
def libvirt_pair():
    """Two daemons, shared by every test (starting them takes seconds)."""
    d = tempfile.mkdtemp(prefix='fclv-')
    os.chmod(d, 0o711)
    pair = hosts_mod.TwoHosts(d)
    try:
        pair.up()
        yield pair.hosts
    finally:
        pair.down()


@pytest.fixture
def libvirt_hosts(libvirt_pair, make_agent):  # noqa: F811
    """The two hosts; a test's domains are destroyed before its agents stop.

    (A QEMU whose NBD disk waits for its agent to come back, for the
    reconnect-delay the driver sets, does not exit on the SIGTERM of
    virDomainDestroy: libvirt kills it 10 s later.)
    """
    yield libvirt_pair
    for host in libvirt_pair:
        host.clean_domains()
