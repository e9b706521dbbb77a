# SPDX-License-Identifier: Apache-2.0
"""Versioned-style notifications of fcache's events (oslo.messaging).

Cache migrations: ``fcache.migration.start``, ``.end``, ``.error``.
A cached volume's life on its compute host (:class:`VolumeNotifier`):
``fcache.volume.attach``, ``fcache.volume.detach``, ``fcache.volume.error``
and its storage moves, ``fcache.storage_move.start``, ``.end``, ``.error``.
Host evacuations by ``fcache evacuate`` (:class:`EvacuationNotifier`):
``fcache.evacuation.start``, ``fcache.evacuation.step`` (one per VM),
``fcache.evacuation.end``.  The balancer's are in
:mod:`nova_ext.balancer.service`.

Every payload has Nova's versioned-notification envelope
(``nova_object.name`` / ``namespace`` / ``version`` / ``data``) so that
consumers of Nova's ``versioned_notifications`` topic can read it with
the code they have.  Inside nova-compute the notifier is Nova's own
(``nova.rpc.get_versioned_notifier``): it follows ``[notifications]
notification_format`` and the transport nova.conf configures.

A notification that cannot be sent is logged and dropped: it must never
fail or roll back what it reports.
"""

import logging

LOG = logging.getLogger(__name__)

START = 'fcache.migration.start'
END = 'fcache.migration.end'
ERROR = 'fcache.migration.error'

VOLUME_ATTACH = 'fcache.volume.attach'
VOLUME_DETACH = 'fcache.volume.detach'
VOLUME_ERROR = 'fcache.volume.error'
MOVE_START = 'fcache.storage_move.start'
MOVE_END = 'fcache.storage_move.end'
MOVE_ERROR = 'fcache.storage_move.error'
EVACUATION_START = 'fcache.evacuation.start'
EVACUATION_STEP = 'fcache.evacuation.step'
EVACUATION_END = 'fcache.evacuation.end'

PAYLOAD_NAME = 'FcacheMigrationPayload'
VOLUME_PAYLOAD_NAME = 'FcacheVolumePayload'
MOVE_PAYLOAD_NAME = 'FcacheStorageMovePayload'
EVACUATION_PAYLOAD_NAME = 'FcacheEvacuationPayload'
PAYLOAD_NAMESPACE = 'fcache'
PAYLOAD_VERSION = '1.0'

# The figures of .end, taken from nova_ext.migration.summary().
END_FIGURES = ('strategy', 'bytes_transferred', 'blocks_transferred',
               'duration_s', 'downtime_s', 'invalidated_blocks',
               'origin_read_bytes')
# A volume's cache policy in fcache.volume.attach (nova_ext.virt.policy).
ATTACH_FIGURES = ('write_policy', 'cache_size', 'admission', 'rws_n',
                  'staging')
# A storage move's figures in fcache.storage_move.end, from the agent's
# volume-move-status (origins left out: an RBD origin names a keyring).
MOVE_FIGURES = ('scheme', 'state', 'bytes_total', 'bytes_copied', 'rounds',
                'elapsed_s', 'downtime_ms')
# An evacuation plan's and its steps' figures (nova_ext.balancer).
EVACUATION_FIGURES = ('source', 'max_concurrent', 'per_destination',
                      'link_bytes', 'storage_bytes', 'est_seconds')
EVACUATION_END_FIGURES = ('done', 'failed', 'duration_s')
STEP_FIGURES = ('vm', 'vm_name', 'source', 'destination', 'state', 'host',
                'message', 'duration_s', 'volumes')


def payload(data, name=PAYLOAD_NAME):
    """Wrap ``data`` in the versioned-notification envelope."""
    return {'nova_object.name': name,
            'nova_object.namespace': PAYLOAD_NAMESPACE,
            'nova_object.version': PAYLOAD_VERSION,
            'nova_object.data': dict(data)}


def _pick(source, keys):
    return dict((k, source.get(k)) for k in keys)


class _Notifier(object):
    """Sends through ``get_notifier(publisher_id)``; never raises."""

    payload_name = PAYLOAD_NAME

    def __init__(self, get_notifier, publisher_id):
        self._get_notifier = get_notifier
        self.publisher_id = publisher_id

    def _emit(self, context, priority, event_type, data, name=None):
        try:
            notifier = self._get_notifier(self.publisher_id)
            getattr(notifier, priority)(
                context, event_type, payload(data, name or self.payload_name))
        except Exception:
            LOG.exception("Could not send notification %s (%s)", event_type,
                          ', '.join('%s %s' % (k, data[k]) for k in (
                              'migration_id', 'volume_id', 'source')
                              if data.get(k)))


class VolumeNotifier(_Notifier):
    """A cached volume's attach, detach and storage moves on this host.

    ``base`` is ``{"instance_uuid", "volume_id"}``; the host is added.

    :param get_notifier: as :class:`MigrationNotifier`'s.
    :param host: this compute host; the publisher id is ``fcache.HOST``.
    """

    payload_name = VOLUME_PAYLOAD_NAME

    def __init__(self, get_notifier, host):
        super().__init__(get_notifier, 'fcache.%s' % host)
        self.host = host

    def _data(self, base, **more):
        data = dict(base)
        data['host'] = self.host
        data.update(more)
        return data

    def attach(self, context, base, pol):
        """The agent caches the volume; ``pol`` its resolved policy."""
        self._emit(context, 'info', VOLUME_ATTACH,
                   self._data(base, **_pick(pol, ATTACH_FIGURES)))

    def detach(self, context, base, dirty_blocks_dropped=None,
               reason='detach'):
        """The agent let the volume go.

        :param dirty_blocks_dropped: None when every dirty block was
            written back; else how many were dropped (a server evacuated
            away, ``reason='evacuated'``).
        """
        self._emit(context, 'info', VOLUME_DETACH, self._data(
            base, reason=reason,
            discarded=dirty_blocks_dropped is not None,
            dirty_blocks_dropped=dirty_blocks_dropped or 0))

    def error(self, context, base, phase, exc):
        """``phase`` (``attach`` or ``detach``) failed with ``exc``."""
        self._emit(context, 'error', VOLUME_ERROR,
                   self._data(base, phase=phase, error=str(exc)))

    def _move(self, context, priority, event_type, data):
        # Same publisher, a payload of its own: a consumer tells moves
        # from attachments by its name.
        self._emit(context, priority, event_type, data, MOVE_PAYLOAD_NAME)

    def move_start(self, context, base, scheme, new_volume_id):
        self._move(context, 'info', MOVE_START, self._data(
            base, scheme=scheme, new_volume_id=new_volume_id))

    def move_end(self, context, base, new_volume_id, status):
        """The move is done; ``status`` the agent's volume-move-status."""
        self._move(context, 'info', MOVE_END, self._data(
            base, new_volume_id=new_volume_id,
            **_pick(status, MOVE_FIGURES)))

    def move_error(self, context, base, new_volume_id, scheme, exc):
        """The move failed: the old volume keeps serving the guest."""
        self._move(context, 'error', MOVE_ERROR, self._data(
            base, new_volume_id=new_volume_id, scheme=scheme,
            error=str(exc)))


class EvacuationNotifier(_Notifier):
    """``fcache evacuate``: the plan, each VM's outcome, the summary.

    :param notifier: an oslo.messaging ``Notifier`` (publisher
        ``fcache.evacuate``), or None to send nothing.
    """

    payload_name = EVACUATION_PAYLOAD_NAME

    def __init__(self, notifier):
        super().__init__(lambda publisher_id: notifier, 'fcache.evacuate')
        self._enabled = notifier is not None

    def start(self, plan):
        """``plan``: the plan's ``as_dict()``."""
        if self._enabled:
            data = _pick(plan, EVACUATION_FIGURES)
            data['vms'] = [s.get('vm') for s in plan.get('steps') or ()]
            data['skipped'] = [s.get('vm') for s in plan.get('skipped') or ()]
            self._emit({}, 'info', EVACUATION_START, data)

    def step(self, result):
        """One VM left (``state`` done) or did not (failed).

        ``result`` is its ``StepResult.as_dict()``: each volume with the
        strategy it moved with.
        """
        if self._enabled:
            data = _pick(result, STEP_FIGURES)
            self._emit({}, 'info' if result.get('state') == 'done'
                       else 'error', EVACUATION_STEP, data)

    def end(self, result):
        """``result``: what ``fcache evacuate`` printed."""
        if self._enabled:
            data = _pick(result, EVACUATION_FIGURES + EVACUATION_END_FIGURES)
            self._emit({}, 'error' if result.get('failed') else 'info',
                       EVACUATION_END, data)


class MigrationNotifier(_Notifier):
    """Emits the three events through an oslo.messaging ``Notifier``.

    :param get_notifier: callable ``publisher_id -> Notifier`` (Nova's
        ``rpc.get_versioned_notifier``, or ``Notifier.prepare``).
    :param host: this compute host; the publisher id is ``fcache.HOST``.
    """

    def __init__(self, get_notifier, host):
        super().__init__(get_notifier, 'fcache.%s' % host)

    def start(self, context, base):
        self._emit(context, 'info', START, base)

    def end(self, context, base, result, hit_ratio_after):
        data = dict(base)
        for key in END_FIGURES:
            data[key] = result.get(key)
        data['hit_ratio_after'] = hit_ratio_after
        self._emit(context, 'info', END, data)

    def error(self, context, base, phase, exc, settle=None):
        """A migration failed in ``phase``.

        :param settle: for a failure after the switchover, what settling
            did: ``{"state": "settled", "mode", "blocks",
            "given_up_blocks"}`` (and ``"settled_from"`` when the source's
            agent settled with its peer itself) or ``{"state":
            "unsettled", "reason"}``.
        """
        data = dict(base)
        data['phase'] = phase
        data['error'] = str(exc)
        if settle is not None:
            data['settle'] = dict(settle)
        self._emit(context, 'error', ERROR, data)
