# SPDX-License-Identifier: Apache-2.0
"""The migration stream on the wire: TLS 1.3, both ends authenticated.

Real agents, with the link between them through a proxy that records (and,
for one test, alters) every byte:

* pinned (the default) and psk: a capture of a whole migration holds
  neither the migration's token nor any byte of the tenant's blocks; the
  data arrives intact.  With ``migration_tls = none`` the same capture
  shows the blocks in clear (so the capture check can fail) and the agent
  warns.
* a rogue listener in place of the destination learns nothing: the source
  refuses to go on before it sends the token or a block, and keeps its VM
  and its cache; a peer that holds another key (pinned) or another token
  (psk) fails the handshake the same way.
* whoever reads everything the orchestrator passes between the hosts
  (Nova's migrate_data and database: migration id, token, both
  fingerprints) runs an agent of their own, and still can neither be the
  destination (the source keeps its blocks) nor the source (the real
  migration then completes, with the tenant's data).
* a stream altered in flight fails cleanly: the migration does not
  complete, the source keeps every dirty block.
* x509 in libvirt/QEMU's layout: certificates from one CA migrate; a
  destination whose certificate another CA signed is refused.
* a peer that drips handshake bytes holds the listener no longer than its
  deadline, while a real source gets in.
"""

import os
import socket
import subprocess
import threading
import time

import pytest

from nova_ext import exception
from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

BS = mu.BS
MiB = mu.MiB
# Written by the VM before the migration, dirty in the source's cache:
# every block starts with this marker, which a capture must not show.
MARKER = b'FCACHE-TENANT-SECRET-'
SECRET_AT = 20 * MiB
SECRET_BLOCKS = 64


class RogueListener(object):
    """Answers on the destination's address, keeps what it is sent."""

    def __init__(self):
        self.lsock = socket.create_server(('127.0.0.1', 0))
        self.address = '127.0.0.1:%d' % self.lsock.getsockname()[1]
        self.received = bytearray()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            c, _ = self.lsock.accept()
        except OSError:
            return
        c.settimeout(15)
        try:
            while True:
                data = c.recv(65536)
                if not data:
                    break
                self.received += data
        except OSError:
            pass
        c.close()

    def close(self):
        self.lsock.close()


def secret_block(i):
    line = MARKER + b'%06d-' % i
    return (line * (BS // len(line) + 1))[:BS]


def source_with_secrets(make_agent, make_origin, src_extra=None,
                        dst_extra=None):
    """Agents and a write_back volume holding the tenant's marked blocks."""
    extra = mu.source_config('write_back')
    extra.update(src_extra or {})
    src, dst = mu.agent_pair(make_agent, src_extra=extra,
                             dst_extra=dst_extra)
    origin = make_origin(mu.VOLUME_SIZE, seed=7)
    res = src.attach('vol1', origin.uri, cache_size=mu.VOLUME_CACHE,
                     write_policy='write_back')
    orc = om.Oracle(origin.content)
    h = om.connect(res['export_uri'], name='tenant')
    for i in range(SECRET_BLOCKS):
        data = secret_block(i)
        assert mu.write_errno(h, SECRET_AT + i * BS, payload=data) == 0
        orc.write(SECRET_AT + i * BS, data)
    st = src.show('vol1')
    assert st['dirty_blocks'] >= SECRET_BLOCKS // 2, st
    return src, dst, origin, orc, h


def migrate_through(src, dst, destination, strategy='hybrid', token=None):
    p = mu.manual_prepare(src, dst, 'vol1', strategy, token=token,
                          destination=destination)
    s, d = src.client(), dst.client()
    migration.start(s, d, p['migration_id'])
    migration.switchover(s, d, p['migration_id'])
    res = migration.finish(s, d, p['migration_id'], timeout_s=60)
    return p, res


def migrate_captured(src, dst):
    """A whole hybrid migration through a proxy that records the link.

    Returns (prepared migration, finish result, bytes seen on the link).
    """
    proxy = mu.TcpProxy(dst.settings['migration_listen'])
    try:
        p, res = migrate_through(src, dst, proxy.address)
    finally:
        proxy.close()
    assert res['state'] == 'completed', res
    return p, res, bytes(proxy.captured)


def check_destination(dst, orc):
    h = om.connect(dst.show('vol1')['export_uri'], name='after')
    try:
        mism = om.verify_all(h, orc, 'destination after the migration')
        assert not mism, mism
    finally:
        om.close(h)


def check_source_kept_everything(src, h, orc, dirty_before):
    st = src.show('vol1')
    assert st['state'] == 'attached', st
    assert st['dirty_blocks'] + st['writebacks'] >= dirty_before, st
    mism = om.verify_all(h, orc, 'source after the refused migration')
    assert not mism, mism


@pytest.mark.parametrize('mode', ('pinned', 'psk'))
def test_stream_shows_neither_token_nor_blocks(make_agent, make_origin,
                                               mode):
    # pinned is the default: nothing to set for it.
    tls = {'migration_tls': mode} if mode != 'pinned' else {}
    src, dst, origin, orc, h = source_with_secrets(
        make_agent, make_origin, src_extra=tls, dst_extra=tls)
    om.close(h)
    p, res, captured = migrate_captured(src, dst)
    assert res['bytes_transferred'] >= SECRET_BLOCKS * BS, res
    assert len(captured) >= SECRET_BLOCKS * BS, len(captured)
    assert p['token'].encode() not in captured
    assert MARKER not in captured
    assert b'"migration_id"' not in captured    # no frame in clear either
    check_destination(dst, orc)
    assert 'authenticated (TLS %s)' % mode in dst.log()
    logs = src.log() + dst.log()
    assert 'IN CLEAR' not in logs
    assert 'PRIVATE KEY' not in logs
    if mode == 'pinned':
        assert p['fingerprint'] and p['source_fingerprint'], p
        assert p['fingerprint'] != p['source_fingerprint']
        assert 'migration_tls = psk' not in logs
    else:
        assert p['fingerprint'] is None, p
        # psk is weaker, and says so.
        assert 'migration_tls = psk: a reader' in logs


def refused_cleanly(src, dst, mid, h, orc, dirty):
    """The destination never connected; abort gives the source all back."""
    assert mu.status(dst, mid)['state'] in ('prepared', 'aborted')
    assert 'authenticated' not in dst.log()
    migration.abort(src.client(), dst.client(), mid)
    check_source_kept_everything(src, h, orc, dirty)
    om.close(h)
    src.assert_alive()
    dst.assert_alive()


def test_plaintext_only_when_asked_and_then_loudly(make_agent, make_origin):
    plain = {'migration_tls': 'none'}
    src, dst, origin, orc, h = source_with_secrets(
        make_agent, make_origin, src_extra=plain, dst_extra=plain)
    om.close(h)
    p, res, captured = migrate_captured(src, dst)
    # The check of the test above can fail: here the blocks are visible.
    assert MARKER in captured
    check_destination(dst, orc)
    for agent in (src, dst):
        assert 'migration_tls = none' in agent.log()
        assert 'IN CLEAR' in agent.log()


def test_rogue_destination_learns_nothing(make_agent, make_origin):
    src, dst, origin, orc, h = source_with_secrets(make_agent, make_origin)
    dirty = src.show('vol1')['dirty_blocks']
    rogue = RogueListener()
    p = mu.manual_prepare(src, dst, 'vol1', 'hybrid',
                          destination=rogue.address)
    try:
        with pytest.raises(exception.FcacheException) as ei:
            migration.start(src.client(), dst.client(), p['migration_id'])
    finally:
        rogue.close()
    assert 'TLS handshake' in str(ei.value), str(ei.value)
    received = bytes(rogue.received)
    assert received, 'the source never reached the rogue listener'
    assert p['token'].encode() not in received
    assert MARKER not in received
    assert b'migration_id' not in received
    migration.abort(src.client(), dst.client(), p['migration_id'])
    check_source_kept_everything(src, h, orc, dirty)
    om.close(h)


def test_destination_with_another_token_is_refused(make_agent, make_origin):
    psk = {'migration_tls': 'psk'}
    src, dst, origin, orc, h = source_with_secrets(
        make_agent, make_origin, src_extra=psk, dst_extra=psk)
    dirty = src.show('vol1')['dirty_blocks']
    mid = 'm-other-token'
    vol = src.show('vol1')
    dst.client().call(
        'migration-incoming', migration_id=mid, volume_id='vol1',
        token=os.urandom(32).hex(), strategy='hybrid', origin=vol['origin'],
        cache_size=vol['cache_size'], write_policy='write_back',
        admission='all')
    src.client().call(
        'migration-outgoing', migration_id=mid, volume_id='vol1',
        token=os.urandom(32).hex(), strategy='hybrid',
        destination=dst.settings['migration_listen'])
    with pytest.raises(exception.FcacheException) as ei:
        migration.start(src.client(), dst.client(), mid)
    assert 'TLS handshake' in str(ei.value), str(ei.value)
    harness.wait_for(lambda: 'refused' in dst.log(), 10, 'the refusal')
    assert 'TLS handshake with the source failed' in dst.log()
    refused_cleanly(src, dst, mid, h, orc, dirty)


@pytest.mark.parametrize('wrong', ('source', 'destination'))
def test_peer_with_another_key_is_refused(make_agent, make_origin, wrong):
    """Each end accepts only the certificate it was told to pin."""
    src, dst, origin, orc, h = source_with_secrets(make_agent, make_origin)
    dirty = src.show('vol1')['dirty_blocks']
    mid = 'm-other-key'
    vol = src.show('vol1')
    src_fp = mu.source_key(src, mid, 'vol1')
    # The same token at both ends: only the key differs.
    token = os.urandom(32).hex()
    inc = dst.client().call(
        'migration-incoming', migration_id=mid, volume_id='vol1',
        token=token, strategy='hybrid', origin=vol['origin'],
        cache_size=vol['cache_size'], write_policy='write_back',
        admission='all',
        peer_fingerprint=os.urandom(32).hex() if wrong == 'source'
        else src_fp)
    src.client().call(
        'migration-outgoing', migration_id=mid, volume_id='vol1',
        token=token, strategy='hybrid',
        destination=dst.settings['migration_listen'],
        peer_fingerprint=os.urandom(32).hex() if wrong == 'destination'
        else inc['fingerprint'])
    with pytest.raises(exception.FcacheException) as ei:
        migration.start(src.client(), dst.client(), mid)
    # TLS 1.3: the source's side of the handshake ends before the
    # destination checked its certificate, which then closes the stream.
    assert 'handshake with' in str(ei.value), str(ei.value)
    if wrong == 'destination':
        # The source saw a certificate it was not told to pin, and said
        # nothing of the migration.
        assert 'not the one pinned' in str(ei.value), str(ei.value)
    else:
        harness.wait_for(lambda: 'not the one pinned' in dst.log(), 10,
                         'the refusal')
    refused_cleanly(src, dst, mid, h, orc, dirty)


def attacker(make_agent):
    """An agent of the attacker's own, as the agents under test run."""
    return make_agent(name='mallory', cache_size='32M',
                      **mu.source_config('write_back')).start()


def test_reader_of_migrate_data_cannot_be_the_destination(
        make_agent, make_origin):
    """Knowing all the orchestrator passes does not let one receive blocks.

    The attacker reads the whole prepare result (what Nova carries in
    migrate_data and keeps in its database until the migration ends) and
    sits on the path: the source dials the attacker's agent, which
    registers the same migration with everything it read.
    """
    src, dst, origin, orc, h = source_with_secrets(make_agent, make_origin)
    dirty = src.show('vol1')['dirty_blocks']
    mallory = attacker(make_agent)
    vol = src.show('vol1')
    p = mu.manual_prepare(src, dst, 'vol1', 'hybrid',
                          destination=mallory.settings['migration_listen'])
    mallory.client().call(
        'migration-incoming', migration_id=p['migration_id'],
        volume_id=p['volume_id'], token=p['token'], strategy=p['strategy'],
        origin=vol['origin'], cache_size=vol['cache_size'],
        write_policy=vol['write_policy'], admission='all',
        **mu.pinned_args(p['source_fingerprint']))
    with pytest.raises(exception.FcacheException) as ei:
        migration.start(src.client(), dst.client(), p['migration_id'])
    assert 'not the one pinned' in str(ei.value), str(ei.value)
    assert mu.status(mallory, p['migration_id'])['state'] == 'prepared'
    assert 'authenticated' not in mallory.log()
    assert mallory.show('vol1').get('dirty_blocks', 0) == 0
    migration.abort(src.client(), dst.client(), p['migration_id'])
    check_source_kept_everything(src, h, orc, dirty)
    om.close(h)
    # Nothing of the tenant's crossed the link to the attacker.
    src.assert_alive()
    mallory.assert_alive()


def test_reader_of_migrate_data_cannot_be_the_source(
        make_agent, make_origin):
    """Knowing all the orchestrator passes does not let one send blocks.

    The attacker's agent holds the volume with bytes of its own and, with
    the whole prepare result, connects to the destination's listener as
    the source would.  Refused, it cannot even spend the migration: the
    real source then migrates the tenant's data.
    """
    src, dst, origin, orc, h = source_with_secrets(make_agent, make_origin)
    om.close(h)
    mallory = attacker(make_agent)
    vol = src.show('vol1')
    mallory.attach('vol1', vol['origin'], cache_size=mu.VOLUME_CACHE,
                   write_policy='write_back')
    hm = om.connect(mallory.show('vol1')['export_uri'], name='attacker')
    for i in range(SECRET_BLOCKS):
        assert mu.write_errno(hm, SECRET_AT + i * BS,
                              payload=b'A' * BS) == 0
    om.close(hm)
    p = mu.manual_prepare(src, dst, 'vol1', 'hybrid')
    # The attacker's agent makes a key of its own: the source's never
    # leaves the source's agent.
    mu.source_key(mallory, p['migration_id'], 'vol1')
    mallory.client().call(
        'migration-outgoing', migration_id=p['migration_id'],
        volume_id=p['volume_id'], token=p['token'], strategy=p['strategy'],
        destination=p['destination'],
        **mu.pinned_args(p['fingerprint']))
    with pytest.raises(exception.FcacheException) as ei:
        mallory.client().call('migration-start',
                              migration_id=p['migration_id'])
    assert 'destination closed the stream without accepting it' in str(
        ei.value), str(ei.value)
    harness.wait_for(lambda: 'not the one pinned' in dst.log(), 10,
                     'the refusal')
    assert mu.status(dst, p['migration_id'])['state'] == 'prepared'
    assert 'authenticated' not in dst.log()
    # The real source still gets through, and the tenant's data arrives.
    s, d = src.client(), dst.client()
    migration.start(s, d, p['migration_id'])
    migration.switchover(s, d, p['migration_id'])
    res = migration.finish(s, d, p['migration_id'], timeout_s=60)
    assert res['state'] == 'completed', res
    check_destination(dst, orc)


def test_altered_stream_fails_and_the_source_keeps_its_blocks(make_agent,
                                                              make_origin):
    src, dst, origin, orc, h = source_with_secrets(make_agent, make_origin)
    dirty = src.show('vol1')['dirty_blocks']
    # Past the handshake and the HELLO, inside the copied blocks: firepan
    # copies them in its start phase, before anything is switched over.
    proxy = mu.TcpProxy(dst.settings['migration_listen'],
                        tamper_at=64 * 1024)
    p = mu.manual_prepare(src, dst, 'vol1', 'firepan',
                          destination=proxy.address)
    s, d = src.client(), dst.client()
    try:
        with pytest.raises(exception.FcacheException):
            migration.start(s, d, p['migration_id'])
    finally:
        proxy.close()
    # The orchestrator aborts both ends once start failed.
    mu.wait_state(dst, p['migration_id'], ('failed', 'aborted'), timeout=20)
    assert 'Bad message' in dst.log(), dst.log()[-3000:]
    migration.abort(s, d, p['migration_id'])
    assert mu.volume_gone(dst, 'vol1')
    check_source_kept_everything(src, h, orc, dirty)
    om.close(h)


def certtool(*args, template=None, cwd=None):
    cmd = ['certtool'] + list(args)
    if template is not None:
        path = os.path.join(cwd, 'template.info')
        with open(path, 'w') as f:
            f.write(template)
        cmd += ['--template', path]
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)


def make_pki(directory, ca_name):
    """A CA, and a server and a client certificate it signs.

    In the layout libvirt and QEMU use for native TLS migration.
    """
    os.makedirs(directory)
    certtool('--generate-privkey', '--outfile', 'ca-key.pem', cwd=directory)
    certtool('--generate-self-signed', '--load-privkey', 'ca-key.pem',
             '--outfile', 'ca-cert.pem', cwd=directory,
             template='cn = %s\nca\ncert_signing_key\nexpiration_days = 2\n'
             % ca_name)
    for role, usage in (('server', 'tls_www_server\nip_address = 127.0.0.1'
                                   '\ndns_name = localhost'),
                        ('client', 'tls_www_client')):
        certtool('--generate-privkey', '--outfile', '%s-key.pem' % role,
                 cwd=directory)
        certtool('--generate-certificate', '--load-privkey',
                 '%s-key.pem' % role, '--load-ca-certificate', 'ca-cert.pem',
                 '--load-ca-privkey', 'ca-key.pem', '--outfile',
                 '%s-cert.pem' % role, cwd=directory,
                 template='cn = fcache %s\n%s\nencryption_key\nsigning_key\n'
                 'expiration_days = 2\n' % (role, usage))
    return directory


def test_x509_host_certificates(make_agent, make_origin, workdir):
    pki = make_pki(os.path.join(workdir, 'pki'), 'fcache test CA')
    tls = {'migration_tls': 'x509', 'migration_tls_dir': pki}
    src, dst, origin, orc, h = source_with_secrets(
        make_agent, make_origin, src_extra=tls, dst_extra=tls)
    om.close(h)
    p, res, captured = migrate_captured(src, dst)
    assert MARKER not in captured
    check_destination(dst, orc)
    assert 'authenticated (TLS x509)' in dst.log()


def test_x509_destination_of_another_ca_is_refused(make_agent, make_origin,
                                                   workdir):
    ours = make_pki(os.path.join(workdir, 'ours'), 'fcache test CA')
    theirs = make_pki(os.path.join(workdir, 'theirs'), 'another CA')
    src, dst, origin, orc, h = source_with_secrets(
        make_agent, make_origin,
        src_extra={'migration_tls': 'x509', 'migration_tls_dir': ours},
        dst_extra={'migration_tls': 'x509', 'migration_tls_dir': theirs})
    dirty = src.show('vol1')['dirty_blocks']
    p = mu.manual_prepare(src, dst, 'vol1', 'hybrid')
    with pytest.raises(exception.FcacheException) as ei:
        migration.start(src.client(), dst.client(), p['migration_id'])
    assert 'not trusted' in str(ei.value), str(ei.value)
    migration.abort(src.client(), dst.client(), p['migration_id'])
    check_source_kept_everything(src, h, orc, dirty)
    om.close(h)


def test_x509_without_certificates_does_not_start(make_agent, workdir):
    agent = make_agent(name='nocert', migration_tls='x509',
                       migration_tls_dir=os.path.join(workdir, 'missing'))
    rc, err = agent.start_expect_failure()
    assert rc != 0
    assert 'migration_tls = x509' in err and 'ca-cert.pem' in err, err


@pytest.mark.timeout(90)
def test_dripped_handshake_holds_the_listener_no_longer_than_its_deadline(
        make_agent, make_origin):
    src, dst, origin, orc, h = source_with_secrets(make_agent, make_origin)
    om.close(h)
    host, port = dst.settings['migration_listen'].rsplit(':', 1)
    drippers = []
    for _ in range(3):
        c = socket.create_connection((host, int(port)), timeout=10)
        drippers.append(c)
    closed = {}
    t0 = time.monotonic()

    def drip():
        for i in range(20):
            for c in drippers:
                if c in closed:
                    continue
                try:
                    c.sendall(b'\x16')      # a TLS handshake record, slowly
                except OSError:
                    closed[c] = time.monotonic() - t0
            time.sleep(0.5)

    t = threading.Thread(target=drip, daemon=True)
    t.start()
    p, res = migrate_through(src, dst, dst.settings['migration_listen'])
    assert res['state'] == 'completed', res
    t.join(timeout=15)
    for c in drippers:
        c.close()
    assert len(closed) == len(drippers), closed
    assert max(closed.values()) < 8, closed
    check_destination(dst, orc)
