# SPDX-License-Identifier: Apache-2.0
"""Live cache migration: the one orchestration function.

Nova's driver hooks and the ``fcache migrate`` command both drive a
migration through these functions, phase by phase or all at once::

    prepare     the source's agent makes its key pair for the migration;
                the destination attaches the volume (gated: it holds the
                VM's I/O until the switch) and makes its own; each agent
                learns the migration id, a one-time token and the
                fingerprint of the other's certificate, which it pins
    start       the source connects to the destination; ``firepan`` copies
                the whole cache here, while the caller keeps the VM paused
    switchover  the VM has moved: the source freezes, flushes or lists its
                dirty data and opens the destination's gate
    finish      wait until the destination holds everything it needs, then
                release the source's cache
    abort       before switchover only: the destination forgets, the
                source keeps the VM and its cache exactly as they were
    settle      after a failure past the switchover (a host or the link
                lost): the blocks whose newest copy is only on the source
                are written back, everything else there is forgotten, and
                the destination serves the volume alone again

Any failure before switchover rolls back with ``abort``; after it, both
agents hold the volume (nothing stale is served, nothing is written back
on the source) until ``settle``.

``fcache migrate`` (and a test) drives both agents from one place.  Nova's
driver cannot: each compute host drives only its own agent, so each phase
also exists one side at a time -- :func:`prepare_key` (on the source,
before the destination prepares), :func:`prepare_destination` (on the
destination; it makes the token), :func:`prepare_source`,
:func:`start_source`, :func:`switchover` and :func:`finish_source` (on the
source, with what the destination handed over), :func:`abort_side` (each
host its own).  Only :func:`settle` needs both agents: it relays block
lists from one to the other.
"""

import errno
import logging
import secrets
import threading
import time
import uuid

from nova_ext import agent
from nova_ext import control_check
from nova_ext import costmodel
from nova_ext import exception

LOG = logging.getLogger(__name__)

STRATEGIES = costmodel.STRATEGIES + ('auto',)
PHASES = ('prepare', 'start', 'switchover', 'finish', 'abort', 'settle')
POLL_INTERVAL_S = 0.1
# Blocks per settle message: the most the agent accepts.
SETTLE_CHUNK = control_check.bounds('migration-settle', 'limit')[1]
# What an agent that does not report them admits with (its defaults).
DEFAULT_ADMISSION = 'all'
DEFAULT_RWS_N = 1
DEFAULT_STAGING = 'hybrid'


def _mbps_to_bps(mbps):
    return int(float(mbps) * 1000 * 1000) if mbps else 0


def choose_strategy(volume, strategy, rate_limit_mbps=None, link_mbps=None,
                    origin_mbps=None):
    """Resolve ``auto`` for one volume from the source's figures.

    :param volume: the source agent's ``volume-show`` result.
    :returns: ``(strategy, reason)``; ``reason`` says why ``auto`` chose.
    :raises InvalidArgument: ``strategy`` is not one the agents run.
    """
    reason = 'requested'
    if strategy == 'auto':
        link = _mbps_to_bps(rate_limit_mbps) or _mbps_to_bps(link_mbps)
        strategy, reason = costmodel.choose_strategy(
            volume, link_bps=link or None,
            origin_bps=_mbps_to_bps(origin_mbps) or None)
        LOG.info("auto strategy for volume %s: %s (%s)",
                 volume.get('volume_id'), strategy, reason)
    if strategy not in costmodel.STRATEGIES:
        raise exception.InvalidArgument(name='strategy', value=strategy,
                                        reason='one of %s' %
                                        ', '.join(STRATEGIES))
    return strategy, reason


def admission_params(volume):
    """The admission parameters of a volume, from its ``volume-show``.

    The agent reports ``admission`` at the top level and RWS_N and the
    staging kind in the volume's ``allocation`` (``rws_n``,
    ``staging.kind``).  What an older agent does not report is what it
    runs: admission ``all``, RWS_1, hybrid staging.

    :returns: dict with ``admission``, ``rws_n`` and ``staging``, the
        arguments of ``volume-attach`` and ``migration-incoming`` that the
        destination must attach the volume with.
    """
    alloc = volume.get('allocation') or {}
    staging = volume.get('staging', alloc.get('staging'))
    if isinstance(staging, dict):
        staging = staging.get('kind')
    return {'admission': volume.get('admission') or DEFAULT_ADMISSION,
            'rws_n': volume.get('rws_n', alloc.get('rws_n')) or
            DEFAULT_RWS_N,
            'staging': staging or DEFAULT_STAGING}


def prepare_key(src, volume_id, migration_id=None):
    """Make the source agent's key pair for a migration, before it is prepared.

    With ``migration_tls = pinned`` (the agents' default) each agent holds
    a fresh key pair per migration and accepts only the peer certificate
    whose SHA-256 fingerprint it was given; the destination needs the
    source's before it accepts a stream, so the source makes it first.
    Only the fingerprint leaves the agent: whoever reads it (in Nova's
    messages or database) cannot complete a handshake with it.

    :returns: dict with ``migration_id`` (made here when None) and
        ``fingerprint`` (None when the agent runs another mode).
    """
    migration_id = migration_id or str(uuid.uuid4())
    try:
        made = src.call('migration-key', migration_id=migration_id,
                        volume_id=volume_id)
    except exception.AgentError as exc:
        if exc.errno != errno.EOPNOTSUPP:
            raise
        # An agent from before the pinned mode: a destination that runs
        # it refuses to prepare without this fingerprint, and says why.
        LOG.warning("The source agent makes no migration key (%s): "
                    "upgrade it to the destination's fcache version", exc)
        made = {}
    return {'migration_id': migration_id,
            'fingerprint': made.get('fingerprint')}


def _pinned(fingerprint):
    return {'peer_fingerprint': fingerprint} if fingerprint else {}


def prepare_destination(dst, volume_id, strategy, origin, cache_size,
                        write_policy, admission, migration_id=None,
                        rws_n=None, staging=None, source_fingerprint=None):
    """Register the incoming side on the destination agent alone.

    The destination attaches the volume gated, learns a fresh one-time
    token and pins ``source_fingerprint`` (:func:`prepare_key`'s); the
    source needs the returned ``migration_id``, ``token``, ``fingerprint``
    and ``destination`` (the agent's migration address) for
    :func:`prepare_source`.  ``rws_n`` and ``staging`` (see
    :func:`admission_params`) are sent when given: None leaves them to the
    destination agent's defaults.

    :returns: dict with ``migration_id``, ``volume_id``, ``strategy``,
        ``token``, ``fingerprint`` (of the destination agent's certificate
        for this migration; None unless it runs ``migration_tls =
        pinned``), ``export_uri`` (what the destination VM opens) and
        ``destination``.
    """
    migration_id = migration_id or str(uuid.uuid4())
    token = secrets.token_hex(32)
    params = _pinned(source_fingerprint)
    if rws_n is not None:
        params['rws_n'] = rws_n
    if staging is not None:
        params['staging'] = staging
    incoming = dst.call('migration-incoming', migration_id=migration_id,
                        volume_id=volume_id, token=token, strategy=strategy,
                        origin=origin, cache_size=cache_size,
                        write_policy=write_policy, admission=admission,
                        **params)
    return {'migration_id': migration_id, 'volume_id': volume_id,
            'strategy': strategy, 'token': token,
            'fingerprint': incoming.get('fingerprint'),
            'export_uri': incoming['export_uri'],
            'destination': incoming['listen']}


def prepare_source(src, prepared, rate_limit_mbps=None):
    """Register the outgoing side on the source agent alone.

    :param prepared: the result of :func:`prepare_destination` (as it
        reached the source host); the source agent pins its
        ``fingerprint`` and uses the key :func:`prepare_key` made.
    """
    return src.call('migration-outgoing',
                    migration_id=prepared['migration_id'],
                    volume_id=prepared['volume_id'],
                    token=prepared['token'], strategy=prepared['strategy'],
                    destination=prepared['destination'],
                    rate_limit_bps=_mbps_to_bps(rate_limit_mbps),
                    **_pinned(prepared.get('fingerprint')))


def prepare(src, dst, volume_id, strategy, rate_limit_mbps=None,
            migration_id=None, link_mbps=None, origin_mbps=None):
    """Register the migration on both agents.

    :returns: dict with ``migration_id``, ``strategy`` (resolved when
        ``auto``), ``export_uri`` (what the destination VM opens),
        ``destination`` (the destination's migration address) and
        ``reason`` (why ``auto`` chose as it did).
    """
    vol = src.show_volume(volume_id)
    strategy, reason = choose_strategy(vol, strategy, rate_limit_mbps,
                                       link_mbps, origin_mbps)
    params = admission_params(vol)
    key = prepare_key(src, volume_id, migration_id)
    prepared = prepare_destination(
        dst, volume_id, strategy, vol['origin'], vol['cache_size'],
        vol['write_policy'], params['admission'], key['migration_id'],
        rws_n=params['rws_n'], staging=params['staging'],
        source_fingerprint=key['fingerprint'])
    try:
        prepare_source(src, prepared, rate_limit_mbps)
    except exception.FcacheException:
        _quiet_abort(dst, prepared['migration_id'])
        raise
    prepared.pop('token')
    prepared['reason'] = reason
    return prepared


def start(src, dst, migration_id):
    """Connect the agents (firepan: copy the cache); roll back on failure."""
    try:
        return src.call('migration-start', migration_id=migration_id)
    except exception.FcacheException:
        abort(src, dst, migration_id)
        raise


def switchover(src, dst, migration_id):
    """The VM now runs on the destination: let its I/O through there."""
    return src.call('migration-switchover', migration_id=migration_id)


def status(client, migration_id):
    return client.call('migration-status', migration_id=migration_id)


def finish(src, dst, migration_id, timeout_s=600, progress=None):
    """Wait for the destination to complete, then release the source.

    ``progress('finish', status)`` is called with each status of the
    destination polled.

    :returns: the summary of :func:`summary`.
    :raises MigrationFailed: the destination reports a failure.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        st = status(dst, migration_id)
        if progress is not None:
            progress('finish', st)
        if st['state'] in ('completed', 'failed', 'aborted'):
            break
        if time.monotonic() > deadline:
            raise exception.MigrationFailed(
                migration_id=migration_id, volume_id=st['volume_id'],
                phase='finish', reason='not complete after %s s' % timeout_s)
        time.sleep(POLL_INTERVAL_S)
    if st['state'] != 'completed':
        raise exception.MigrationFailed(
            migration_id=migration_id, volume_id=st['volume_id'],
            phase='finish', reason=st.get('error', st['state']))
    src_st = src.call('migration-finish', migration_id=migration_id,
                      timeout_s=int(max(1, deadline - time.monotonic())))
    return summary(src_st, st, dst.show_volume(st['volume_id']))


def start_source(src, migration_id):
    """:func:`start` driven from the source host alone.

    On failure the source side is rolled back here; the destination side
    is the destination host's to abort (:func:`abort_side`).
    """
    try:
        return src.call('migration-start', migration_id=migration_id)
    except exception.FcacheException:
        _quiet_abort(src, migration_id)
        raise


def finish_source(src, migration_id, volume_id, timeout_s=600):
    """:func:`finish` driven from the source host alone.

    The source agent learns completion from the destination over their
    own stream, so this needs no call to the destination agent.

    :returns: the source's ``migration-status`` (``bytes_done``,
        ``blocks_done``, ``downtime_s``, ``duration_s``, ...).
    :raises MigrationFailed: the migration failed or did not complete in
        ``timeout_s``.
    """
    try:
        return src.call('migration-finish', migration_id=migration_id,
                        timeout_s=int(max(1, timeout_s)))
    except exception.AgentError as exc:
        raise exception.MigrationFailed(
            migration_id=migration_id, volume_id=volume_id, phase='finish',
            reason=exc.error)


def abort_side(client, migration_id):
    """Abort one side of a migration (before switchover).

    Each host aborts what its own agent holds: the source thaws and keeps
    its cache, the destination forgets and detaches.
    """
    return client.call('migration-abort', migration_id=migration_id)


def abort(src, dst, migration_id):
    """Roll back: the destination forgets first, then the source thaws."""
    _quiet_abort(dst, migration_id)
    return src.call('migration-abort', migration_id=migration_id)


def settle(src, dst, migration_id, volume_id, source_lost=False):
    """Give a volume back to the destination after a failure past switchover.

    The destination lists blocks (sorted, in chunks): in ``missing`` mode
    those still only on the source, which writes them back; in ``held``
    mode (the destination restarted) those it holds dirty, which the
    source forgets before writing back the rest of its dirty blocks; in
    ``completed`` mode nothing.  Then the source releases the volume and
    only after that may the destination read those blocks from the origin.

    ``source_lost=True`` is for a source host that is gone for good: the
    destination gives up the blocks only the source had (the origin's
    older copies are read instead) and the count is returned.

    :returns: dict with ``mode``, ``blocks`` (listed), ``given_up_blocks``.
    :raises MigrationFailed: a block the destination needs is not on the
        source; nothing is released then.
    """
    def fail(reason):
        return exception.MigrationFailed(migration_id=migration_id,
                                         volume_id=volume_id,
                                         phase='settle', reason=reason)

    ids = {'migration_id': migration_id, 'volume_id': volume_id}
    if source_lost:
        end = dst.call('migration-settle', step='end', source='lost', **ids)
        return {'mode': end['mode'], 'blocks': 0,
                'given_up_blocks': end['given_up_blocks']}
    listed = 0
    missing = []
    after = None
    while True:
        args = dict(ids, step='list', limit=SETTLE_CHUNK)
        if after is not None:
            args['after'] = after
        page = dst.call('migration-settle', **args)
        mode = page['mode']
        if page['blocks']:
            step = 'writeback' if mode == 'missing' else 'drop'
            done = src.call('migration-settle', step=step,
                            blocks=page['blocks'], **ids)
            missing.extend(done.get('missing', []))
            listed += len(page['blocks'])
            after = page['blocks'][-1]
        if not page['more']:
            break
    if missing:
        raise fail('%d blocks the destination needs are not dirty on the '
                   'source (first: %s); nothing was released'
                   % (len(missing), ', '.join(map(str, missing[:5]))))
    src.call('migration-settle', step='release',
             rest='writeback' if mode == 'held' else 'drop', **ids)
    end = dst.call('migration-settle', step='end', source='released', **ids)
    LOG.info("migration %s of volume %s settled (%s, %d blocks listed)",
             migration_id, volume_id, mode, listed)
    return {'mode': mode, 'blocks': listed,
            'given_up_blocks': end['given_up_blocks']}


# Settling through the agents runs every step in one control request.
SETTLE_THROUGH_TIMEOUT_S = 600.0


def settle_through(client, migration_id, volume_id,
                   timeout_s=SETTLE_THROUGH_TIMEOUT_S):
    """:func:`settle` with one agent's control socket: either host's.

    That agent runs the same steps itself, asking its peer agent for the
    peer's over the peer's migration listener, authenticated by the settle
    secret both agents kept from the migration's own stream (so either
    may have restarted since).  A migration whose peer agent predates
    settle secrets is refused with ``ENOKEY``: settle it with
    :func:`settle` and both control sockets.

    :returns: dict with ``mode``, ``blocks`` (listed), ``given_up_blocks``
        and ``settled_from`` (``source`` or ``destination``).
    """
    if isinstance(client, agent.AgentClient) and client.timeout < timeout_s:
        client = agent.AgentClient(client.socket_path, timeout=timeout_s)
    res = client.call('migration-settle', step='all',
                      migration_id=migration_id, volume_id=volume_id)
    LOG.info("migration %s of volume %s settled through the %s agent (%s, "
             "%d blocks listed)", migration_id, volume_id,
             res['settled_from'], res['mode'], res['blocks'])
    return res


def settle_failed(src, dst, migration_id, volume_id, wait_s=30):
    """:func:`settle`, once both agents have seen the migration fail.

    A failure seen by one side (a lost stream, a timeout) reaches the other
    a moment later; until then the agents refuse to settle with ``EBUSY``,
    and this retries for up to ``wait_s`` seconds.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return settle(src, dst, migration_id, volume_id)
        except exception.AgentError as exc:
            if (exc.errno != errno.EBUSY or
                    time.monotonic() + POLL_INTERVAL_S > deadline):
                raise
        time.sleep(POLL_INTERVAL_S)


def settle_through_failed(client, migration_id, volume_id, wait_s=30):
    """:func:`settle_through`, once both agents have seen the failure.

    As :func:`settle_failed`, with this host's agent alone.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return settle_through(client, migration_id, volume_id)
        except exception.AgentError as exc:
            if (exc.errno != errno.EBUSY or
                    time.monotonic() + POLL_INTERVAL_S > deadline):
                raise
        time.sleep(POLL_INTERVAL_S)


def _quiet_abort(client, migration_id):
    try:
        client.call('migration-abort', migration_id=migration_id)
    except exception.FcacheException as exc:
        LOG.warning("abort of migration %s on %r: %s", migration_id,
                    client, exc)


def summary(src_status, dst_status, dst_volume):
    """What ``fcache migrate --wait`` prints (doc/cli/fcache.rst)."""
    return {
        'migration_id': dst_status['migration_id'],
        'volume_id': dst_status['volume_id'],
        'strategy': dst_status['strategy'],
        'state': 'completed' if dst_status['state'] == 'completed'
        else 'failed',
        'blocks_transferred': int(src_status.get('blocks_done') or 0) +
        int(dst_status.get('fetched_blocks', 0)),
        'bytes_transferred': int(src_status.get('bytes_done') or 0),
        'duration_s': float(dst_status.get('duration_s', 0.0)),
        'downtime_s': float(src_status.get('downtime_s') or 0.0),
        'invalidated_blocks': int(dst_status.get('invalidated_blocks', 0)),
        'origin_read_bytes': int(dst_volume.get('origin_read_bytes', 0)),
        'preloaded_blocks': int(dst_status.get('blocks_done', 0))
        if dst_status['strategy'] == 'cachemior' else 0,
        'fetched_blocks': int(dst_status.get('fetched_blocks', 0)),
        'discarded_copies': int(dst_status.get('discarded_copies', 0)),
    }


class _Watch(object):
    """Reports a migration's progress while a phase blocks.

    ``progress(phase, status)`` is called with the migration's status on
    ``client`` every ``interval`` seconds while the phase's own call runs
    in this thread (``start``: firepan's whole cache copy).
    """

    def __init__(self, client, migration_id, phase, progress,
                 interval=0.5):
        self._stop = threading.Event()
        self._args = (client, migration_id, phase, progress, interval)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        client, migration_id, phase, progress, interval = self._args
        while not self._stop.wait(interval):
            try:
                progress(phase, status(client, migration_id))
            except exception.FcacheException:
                # Only the display misses a beat: the phase's own call
                # reports whatever failed.
                pass

    def __enter__(self):
        if self._args[3] is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def migrate(src, dst, volume_id, strategy, rate_limit_mbps=None,
            move_vm=None, timeout_s=600, progress=None, **prepare_kwargs):
    """Run every phase in order; ``move_vm(prepared)`` moves the VM.

    ``progress(phase, status)``, when given, is called as the phases go:
    with the migration's status (``bytes_done`` of ``bytes_total``, ...)
    from the source during ``start`` and the destination during
    ``finish``, and with None as ``prepare`` and ``switchover`` end.

    ``move_vm`` is called between start and switchover with the result of
    :func:`prepare` (its ``export_uri`` is what the destination VM opens).
    Without it the caller is expected to have nothing to move (a test, or
    a hypervisor that moves the VM itself after this returns).

    :returns: the summary of :func:`summary`, plus ``reason``.
    """
    t0 = time.monotonic()
    prepared = prepare(src, dst, volume_id, strategy, rate_limit_mbps,
                       **prepare_kwargs)
    mid = prepared['migration_id']
    if progress is not None:
        progress('prepare', None)
    with _Watch(src, mid, 'start', progress):
        start(src, dst, mid)
    if move_vm is not None:
        try:
            move_vm(prepared)
        except Exception:
            abort(src, dst, mid)
            raise
    switchover(src, dst, mid)
    if progress is not None:
        progress('switchover', None)
    result = finish(src, dst, mid, timeout_s=timeout_s, progress=progress)
    result['duration_s'] = time.monotonic() - t0
    result['reason'] = prepared['reason']
    return result
