"""nova_ext.notifications through a real oslo.messaging Notifier."""

from oslo_config import cfg
import oslo_messaging
from oslo_messaging.notify import _impl_test

from nova_ext import notifications

BASE = {'instance_uuid': 'i-1', 'migration_id': 'm-1', 'volume_id': 'v-1',
        'strategy': 'hybrid', 'source_host': 'cmp1', 'dest_host': 'cmp2'}


def _notifier():
    conf = cfg.ConfigOpts()
    conf([])
    transport = oslo_messaging.get_notification_transport(
        conf, url='fake://')
    root = oslo_messaging.Notifier(transport, driver='test',
                                   topics=['versioned_notifications'])
    _impl_test.reset()
    return notifications.MigrationNotifier(
        lambda pid: root.prepare(publisher_id=pid), 'cmp1')


def _sent():
    # (ctxt, message, priority, retry) as the "test" driver stores them.
    return [n[1] for n in _impl_test.NOTIFICATIONS]


def test_start_end_error_event_types_and_envelope():
    notifier = _notifier()
    notifier.start({}, BASE)
    notifier.end({}, BASE, {'strategy': 'hybrid', 'bytes_transferred': 8192,
                            'blocks_transferred': 2, 'duration_s': 1.5,
                            'downtime_s': 0.01, 'invalidated_blocks': 0,
                            'origin_read_bytes': 0}, 0.75)
    notifier.error({}, BASE, 'finish', RuntimeError('link cut'))
    sent = _sent()
    assert [n['event_type'] for n in sent] == [
        'fcache.migration.start', 'fcache.migration.end',
        'fcache.migration.error']
    assert [n['priority'] for n in sent] == ['INFO', 'INFO', 'ERROR']
    assert {n['publisher_id'] for n in sent} == {'fcache.cmp1'}
    end = sent[1]['payload']
    assert end['nova_object.name'] == 'FcacheMigrationPayload'
    assert end['nova_object.namespace'] == 'fcache'
    assert end['nova_object.version'] == '1.0'
    data = end['nova_object.data']
    assert data['bytes_transferred'] == 8192
    assert data['duration_s'] == 1.5
    assert data['downtime_s'] == 0.01
    assert data['hit_ratio_after'] == 0.75
    assert data['volume_id'] == 'v-1'
    error = sent[2]['payload']['nova_object.data']
    assert error['phase'] == 'finish'
    assert error['error'] == 'link cut'
    # Only a failure after the switchover says how it was settled.
    assert 'settle' not in error


def test_error_after_switchover_says_how_it_was_settled():
    notifier = _notifier()
    notifier.error({}, BASE, 'finish', RuntimeError('link cut'),
                   settle={'state': 'settled', 'mode': 'missing',
                           'blocks': 12, 'given_up_blocks': 0})
    notifier.error({}, BASE, 'finish', RuntimeError('link cut'),
                   settle={'state': 'unsettled',
                           'reason': '[fcache] peer_agent_socket is not set'})
    settled, unsettled = [n['payload']['nova_object.data']['settle']
                          for n in _sent()]
    assert settled == {'state': 'settled', 'mode': 'missing', 'blocks': 12,
                       'given_up_blocks': 0}
    assert unsettled['state'] == 'unsettled'


def test_a_broken_notifier_never_raises():
    def broken(publisher_id):
        raise RuntimeError('no transport')
    notifications.MigrationNotifier(broken, 'cmp1').start({}, BASE)
