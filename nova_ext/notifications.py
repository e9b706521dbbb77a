"""Versioned-style notifications of cache migrations (oslo.messaging).

Event types ``fcache.migration.start``, ``fcache.migration.end`` and
``fcache.migration.error``; the payload has Nova's versioned-notification
envelope (``nova_object.name`` / ``namespace`` / ``version`` / ``data``) so
that consumers of Nova's ``versioned_notifications`` topic can read it with
the code they have.  Inside nova-compute the notifier is Nova's own
(``nova.rpc.get_versioned_notifier``): it follows ``[notifications]
notification_format`` and the transport nova.conf configures.

A notification that cannot be sent is logged and dropped: it must never
fail or roll back a migration.
"""

import logging

LOG = logging.getLogger(__name__)

START = 'fcache.migration.start'
END = 'fcache.migration.end'
ERROR = 'fcache.migration.error'

PAYLOAD_NAME = 'FcacheMigrationPayload'
PAYLOAD_NAMESPACE = 'fcache'
PAYLOAD_VERSION = '1.0'

# The figures of .end, taken from nova_ext.migration.summary().
END_FIGURES = ('strategy', 'bytes_transferred', 'blocks_transferred',
               'duration_s', 'downtime_s', 'invalidated_blocks',
               'origin_read_bytes')


def payload(data):
    """Wrap ``data`` in the versioned-notification envelope."""
    return {'nova_object.name': PAYLOAD_NAME,
            'nova_object.namespace': PAYLOAD_NAMESPACE,
            'nova_object.version': PAYLOAD_VERSION,
            'nova_object.data': dict(data)}


class MigrationNotifier(object):
    """Emits the three events through an oslo.messaging ``Notifier``.

    :param get_notifier: callable ``publisher_id -> Notifier`` (Nova's
        ``rpc.get_versioned_notifier``, or ``Notifier.prepare``).
    :param host: this compute host; the publisher id is ``fcache.HOST``.
    """

    def __init__(self, get_notifier, host):
        self._get_notifier = get_notifier
        self.publisher_id = 'fcache.%s' % host

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
            "given_up_blocks"}`` or ``{"state": "unsettled", "reason"}``.
        """
        data = dict(base)
        data['phase'] = phase
        data['error'] = str(exc)
        if settle is not None:
            data['settle'] = dict(settle)
        self._emit(context, 'error', ERROR, data)

    def _emit(self, context, priority, event_type, data):
        try:
            notifier = self._get_notifier(self.publisher_id)
            getattr(notifier, priority)(context, event_type, payload(data))
        except Exception:
            LOG.exception("Could not send notification %s for migration %s",
                          event_type, data.get('migration_id'))
