# SPDX-License-Identifier: Apache-2.0
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


VOLUME = {'instance_uuid': 'i-1', 'volume_id': 'v-1'}


def _volume_notifier():
    _notifier()     # a fresh test driver
    conf = cfg.ConfigOpts()
    conf([])
    transport = oslo_messaging.get_notification_transport(
        conf, url='fake://')
    root = oslo_messaging.Notifier(transport, driver='test',
                                   topics=['versioned_notifications'])
    return notifications.VolumeNotifier(
        lambda pid: root.prepare(publisher_id=pid), 'cmp1')


def test_volume_attach_detach_error():
    notifier = _volume_notifier()
    notifier.attach({}, VOLUME, {'write_policy': 'write_back',
                                 'cache_size': 1 << 30, 'admission': 'rws',
                                 'rws_n': 2, 'staging': 'hybrid',
                                 'medium': 'ssd'})
    notifier.detach({}, VOLUME)
    notifier.detach({}, VOLUME, dirty_blocks_dropped=7, reason='evacuated')
    notifier.error({}, VOLUME, 'detach', RuntimeError('origin gone'))
    sent = _sent()
    assert [n['event_type'] for n in sent] == [
        'fcache.volume.attach', 'fcache.volume.detach',
        'fcache.volume.detach', 'fcache.volume.error']
    assert [n['priority'] for n in sent] == ['INFO', 'INFO', 'INFO', 'ERROR']
    assert {n['publisher_id'] for n in sent} == {'fcache.cmp1'}
    assert {n['payload']['nova_object.name'] for n in sent} == {
        'FcacheVolumePayload'}
    attach, detach, dropped, error = [n['payload']['nova_object.data']
                                      for n in sent]
    assert attach == {'instance_uuid': 'i-1', 'volume_id': 'v-1',
                      'host': 'cmp1', 'write_policy': 'write_back',
                      'cache_size': 1 << 30, 'admission': 'rws', 'rws_n': 2,
                      'staging': 'hybrid'}
    assert detach['discarded'] is False and detach['reason'] == 'detach'
    assert detach['dirty_blocks_dropped'] == 0
    assert dropped['discarded'] is True and dropped['reason'] == 'evacuated'
    assert dropped['dirty_blocks_dropped'] == 7
    assert error['phase'] == 'detach' and error['error'] == 'origin gone'


def test_storage_move_events():
    notifier = _volume_notifier()
    notifier.move_start({}, VOLUME, 'lr', 'v-2')
    notifier.move_end({}, VOLUME, 'v-2', {
        'scheme': 'lr', 'state': 'done', 'bytes_total': 1 << 20,
        'bytes_copied': 1 << 20, 'rounds': 2, 'elapsed_s': 1.5,
        'downtime_ms': 3.0, 'from': '/dev/a', 'to': 'rbd:p/i:keyring=/k'})
    notifier.move_error({}, VOLUME, 'v-2', 'aio', RuntimeError('timed out'))
    sent = _sent()
    assert [n['event_type'] for n in sent] == [
        'fcache.storage_move.start', 'fcache.storage_move.end',
        'fcache.storage_move.error']
    assert [n['priority'] for n in sent] == ['INFO', 'INFO', 'ERROR']
    assert {n['payload']['nova_object.name'] for n in sent} == {
        'FcacheStorageMovePayload'}
    start, end, error = [n['payload']['nova_object.data'] for n in sent]
    assert start['scheme'] == 'lr' and start['new_volume_id'] == 'v-2'
    assert end['bytes_copied'] == 1 << 20 and end['elapsed_s'] == 1.5
    assert end['downtime_ms'] == 3.0 and end['state'] == 'done'
    # Origins stay out: an RBD origin names its keyring.
    assert 'from' not in end and 'to' not in end
    assert error['error'] == 'timed out' and error['scheme'] == 'aio'


def test_evacuation_events():
    _notifier()
    conf = cfg.ConfigOpts()
    conf([])
    transport = oslo_messaging.get_notification_transport(
        conf, url='fake://')
    notifier = notifications.EvacuationNotifier(oslo_messaging.Notifier(
        transport, driver='test', publisher_id='fcache.evacuate',
        topics=['notifications']))
    plan = {'source': 'cmp1', 'max_concurrent': 2, 'per_destination': 1,
            'dry_run': False,
            'steps': [{'vm': 'a', 'destination': 'cmp2'},
                      {'vm': 'b', 'destination': 'cmp3'}],
            'skipped': [{'vm': 'c', 'reason': 'no room'}]}
    notifier.start(plan)
    notifier.step({'vm': 'a', 'source': 'cmp1', 'destination': 'cmp2',
                   'state': 'done', 'host': 'cmp2', 'message': '',
                   'duration_s': 12.5, 'wave': 0,
                   'volumes': [{'volume': 'v-1', 'strategy': 'hybrid'}]})
    notifier.step({'vm': 'b', 'source': 'cmp1', 'destination': 'cmp3',
                   'state': 'failed', 'host': 'cmp1',
                   'message': 'Nova refused', 'duration_s': None,
                   'volumes': []})
    notifier.end(dict(plan, done=1, failed=1, duration_s=20.0))
    sent = _sent()
    assert [n['event_type'] for n in sent] == [
        'fcache.evacuation.start', 'fcache.evacuation.step',
        'fcache.evacuation.step', 'fcache.evacuation.end']
    assert [n['priority'] for n in sent] == ['INFO', 'INFO', 'ERROR',
                                             'ERROR']
    assert {n['publisher_id'] for n in sent} == {'fcache.evacuate'}
    start, done, failed, end = [n['payload']['nova_object.data']
                                for n in sent]
    assert start['vms'] == ['a', 'b'] and start['skipped'] == ['c']
    assert done['volumes'] == [{'volume': 'v-1', 'strategy': 'hybrid'}]
    assert done['source'] == 'cmp1' and done['host'] == 'cmp2'
    assert 'wave' not in done
    assert failed['message'] == 'Nova refused'
    assert end['done'] == 1 and end['failed'] == 1
    assert end['duration_s'] == 20.0


def test_no_evacuation_notifier_sends_nothing():
    _notifier()
    notifier = notifications.EvacuationNotifier(None)
    notifier.start({'source': 'cmp1', 'steps': []})
    notifier.end({'done': 0, 'failed': 0})
    assert _sent() == []
