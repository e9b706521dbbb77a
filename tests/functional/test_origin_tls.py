# SPDX-License-Identifier: Apache-2.0
"""Origins on an NBD server that requires TLS (``nbds://``).

nbdkit with ``--tls=require`` serves the origin; the agent reaches it with
the credentials of its own configuration (``origin_tls_psk_file`` or
``origin_tls_dir``), never with files a URI names.  The workload's data is
checked against the oracle through the agent; a missing or wrong key, or
a plaintext URI for a server that requires TLS, is refused with a clear
error and attaches nothing.
"""

import os

import pytest

from nova_ext import exception

from fcache_testkit import harness
from fcache_testkit import oracle as om

from .test_migration_tls import make_pki

MiB = 1 << 20
SIZE = 16 * MiB


def tls_origin(workdir, options, scheme='nbds+unix', seed=3):
    path = os.path.join(workdir, 'tls-origin.img')
    content = harness.make_origin_file(path, SIZE, seed=seed)
    server = harness.NbdkitOrigin(workdir, 'tls-origin', path,
                                  options=options, scheme=scheme).start()
    return server, content


def psk_file(workdir, name, key):
    path = os.path.join(workdir, name)
    with open(path, 'w') as f:
        f.write('fcache:%s\n' % key)
    os.chmod(path, 0o600)
    return path


def run_oracle(agent, uri, content, vid='vol1'):
    res = agent.attach(vid, uri, cache_size=8 * MiB, write_policy='write_back')
    orc = om.Oracle(content)
    h = om.connect(res['export_uri'], name='tls-origin')
    try:
        wl = om.Workload(h, orc, seed=11)
        wl.run(nops=1500)
        wl.assert_clean()
        mism = om.verify_all(h, orc, 'through the agent')
        assert not mism, mism
    finally:
        om.close(h)
    return orc


@pytest.fixture
def servers():
    started = []
    yield started
    for s in started:
        s.stop()


def test_psk_origin(make_agent, workdir, servers):
    key = os.urandom(32).hex()
    srv, content = tls_origin(
        workdir, ['--tls=require', '--tls-psk=%s' % psk_file(
            workdir, 'server.psk', key)])
    servers.append(srv)
    uri = srv.uri + '&tls-username=fcache'
    agent = make_agent(origin_tls_psk_file=psk_file(workdir, 'agent.psk',
                                                    key)).start()
    orc = run_oracle(agent, uri, content)
    agent.detach('vol1')
    # Written back over TLS: the origin file holds the oracle's bytes.
    with open(srv.path, 'rb') as f:
        assert not om.compare(orc, f.read(), 'origin after detach')


def test_psk_origin_refused_without_the_key(make_agent, workdir, servers):
    key = os.urandom(32).hex()
    srv, content = tls_origin(
        workdir, ['--tls=require', '--tls-psk=%s' % psk_file(
            workdir, 'server.psk', key)])
    servers.append(srv)
    uri = srv.uri + '&tls-username=fcache'
    wrong = psk_file(workdir, 'wrong.psk', os.urandom(32).hex())
    for extra in ({}, {'origin_tls_psk_file': wrong}):
        agent = make_agent(name='a%d' % len(extra), **extra).start()
        with pytest.raises(exception.FcacheException) as ei:
            agent.attach('vol1', uri, cache_size=8 * MiB)
        assert 'cannot connect to origin' in str(ei.value), str(ei.value)
        assert agent.status()['volumes'] == []
        agent.stop()
    # A plaintext URI for a server that requires TLS gets nothing either.
    agent = make_agent(name='plain').start()
    with pytest.raises(exception.FcacheException):
        agent.attach('vol1', srv.uri.replace('nbds+unix', 'nbd+unix'),
                     cache_size=8 * MiB)
    # And the URI may not name the key file itself.
    with pytest.raises(exception.FcacheException):
        agent.attach('vol1', uri + '&tls-psk-file=%s' % wrong,
                     cache_size=8 * MiB)
    assert agent.status()['volumes'] == []


def test_x509_origin(make_agent, workdir, servers):
    pki = make_pki(os.path.join(workdir, 'pki'), 'origin CA')
    srv, content = tls_origin(
        workdir, ['--tls=require', '--tls-certificates=%s' % pki,
                  '--tls-verify-peer'])
    servers.append(srv)
    agent = make_agent(origin_tls_dir=pki).start()
    run_oracle(agent, srv.uri, content)
    # Certificates of another CA: the server is not trusted.
    other = make_pki(os.path.join(workdir, 'other'), 'another CA')
    stranger = make_agent(name='stranger', origin_tls_dir=other).start()
    with pytest.raises(exception.FcacheException) as ei:
        stranger.attach('vol1', srv.uri, cache_size=8 * MiB)
    assert 'cannot connect to origin' in str(ei.value), str(ei.value)


def test_tls_keys_must_be_absolute(make_agent):
    agent = make_agent(name='bad', origin_tls_psk_file='keys/agent.psk')
    rc, log = agent.start_expect_failure()
    assert rc != 0 and 'origin_tls_psk_file' in log, log
