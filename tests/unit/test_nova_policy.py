# SPDX-License-Identifier: Apache-2.0
"""nova_ext.virt.policy: what nova-compute makes of connection_info."""

from oslo_config import cfg
from oslo_config import fixture as config_fixture
import pytest

from nova_ext import exception
from nova_ext import opts
from nova_ext.virt import policy


@pytest.fixture
def conf():
    fixture = config_fixture.Config(cfg.ConfigOpts())
    fixture.setUp()
    opts.register_opts(fixture.conf)
    yield fixture
    fixture.cleanUp()


def _info(data):
    return {'driver_volume_type': 'iscsi', 'data': data}


def test_not_cacheable_is_not_cached(conf):
    assert policy.resolve(_info({'fcache': {'strategy': 'firepan'}}),
                          conf.conf.fcache) is None
    assert policy.resolve(_info({'cacheable': False}),
                          conf.conf.fcache) is None


def test_defaults_fill_what_the_type_does_not_set(conf):
    conf.config(default_strategy='hybrid', default_cache_size='1G',
                default_rate_limit=50.0, group='fcache')
    pol = policy.resolve(_info({'cacheable': True,
                                'fcache': {'write_policy': 'write_back'}}),
                         conf.conf.fcache)
    assert pol == {'strategy': 'hybrid', 'cache_size': 1 << 30,
                   'write_policy': 'write_back', 'admission': 'all',
                   'rws_n': 1, 'staging': 'hybrid', 'rate_limit': 50.0,
                   'storage_migration': 'auto', 'medium': 'ssd',
                   'wear_weight': 0.5}


def test_storage_move_policy_through_the_cinder_bridge(conf):
    from cinder_ext import policy as cinder_policy
    conf.config(default_medium='hdd', default_wear_weight=0.9,
                group='fcache')
    data = cinder_policy.add_to_connection_data(
        {'cacheable': True}, {'fcache:storage_migration': 'slr',
                              'fcache:medium': 'ssd',
                              'fcache:wear_weight': '0'})
    pol = policy.resolve(_info(data), conf.conf.fcache)
    # A weight of 0 from the type is not "unset".
    assert (pol['storage_migration'], pol['medium'],
            pol['wear_weight']) == ('slr', 'ssd', 0.0)
    pol = policy.resolve(_info({'cacheable': True}), conf.conf.fcache)
    assert (pol['storage_migration'], pol['medium'],
            pol['wear_weight']) == ('auto', 'hdd', 0.9)


def test_agent_volume_id():
    assert policy.agent_volume_id({'serial': 's', 'data': {}}) == 's'
    assert policy.agent_volume_id(
        {'serial': 's', 'data': {'volume_id': 'v'}}) == 'v'
    # After a storage move the agent keeps the id it attached with.
    assert policy.agent_volume_id(
        {'serial': 's', 'data': {'volume_id': 'v',
                                 'fcache_volume': 'old'}}) == 'old'
    assert policy.agent_volume_id(None) is None


def test_rws_defaults_come_from_nova_conf(conf):
    conf.config(default_admission='rws', default_rws_n=2,
                default_staging='address', group='fcache')
    pol = policy.resolve(_info({'cacheable': True}), conf.conf.fcache)
    assert (pol['admission'], pol['rws_n'], pol['staging']) == (
        'rws', 2, 'address')


def test_type_rws_specs_override_nova_conf(conf):
    conf.config(default_rws_n=2, default_staging='address', group='fcache')
    pol = policy.resolve(_info({'cacheable': True, 'fcache': {
        'admission': 'rws', 'rws_n': 3, 'staging': 'data'}}),
        conf.conf.fcache)
    assert (pol['admission'], pol['rws_n'], pol['staging']) == (
        'rws', 3, 'data')


def test_rws_specs_through_the_cinder_bridge(conf):
    # What Cinder puts in connection_info is what nova-compute resolves.
    from cinder_ext import policy as cinder_policy
    data = cinder_policy.add_to_connection_data(
        {'cacheable': True}, {'fcache:admission': 'rws',
                              'fcache:rws_n': '2',
                              'fcache:staging': 'data'})
    pol = policy.resolve(_info(data), conf.conf.fcache)
    assert (pol['admission'], pol['rws_n'], pol['staging']) == (
        'rws', 2, 'data')


def test_type_overrides_defaults(conf):
    conf.config(default_cache_size='1G', group='fcache')
    pol = policy.resolve(_info({'cacheable': True, 'fcache': {
        'strategy': 'cachemior', 'cache_size': 4096, 'admission': 'rws',
        'rate_limit': 0.0}}), conf.conf.fcache)
    assert pol['strategy'] == 'cachemior'
    assert pol['cache_size'] == 4096
    assert pol['admission'] == 'rws'
    # 0 from the type means "no cap" and must not fall back to the default.
    assert pol['rate_limit'] == 0.0


def test_bad_default_cache_size_names_the_option(conf):
    # oslo.config's regex refuses '12Q' already; a value that passes the
    # regex but not parse_size (zero) reaches our check.
    conf.config(default_cache_size='0', group='fcache')
    with pytest.raises(exception.InvalidArgument) as err:
        policy.resolve(_info({'cacheable': True}), conf.conf.fcache)
    assert '[fcache] default_cache_size' in str(err.value)


def test_origin_is_the_os_brick_device_path():
    assert policy.origin(_info({'device_path': '/dev/sdb'})) == '/dev/sdb'
    assert policy.origin(_info({})) is None


class _DriverBlockDevice(dict):
    """What Nova's DriverVolumeBlockDevice is: a dict with methods."""


def test_connection_info_not_a_mapping_is_not_cached(conf):
    # Nova's driver interface passes connection_info through as its caller
    # holds it; only a mapping can say cacheable.
    for info in (None, object(), 'iscsi', ['data'], {'data': 'x'}):
        assert policy.connection_data(info) == {}
        assert not policy.is_cacheable(info)
        assert policy.resolve(info, conf.conf.fcache) is None
        assert policy.agent_volume_id(info) is None
        assert policy.origin(info) is None


def test_bdm_connection_info(conf):
    info = _info({'cacheable': True, 'volume_id': 'v'})
    assert policy.bdm_connection_info(
        _DriverBlockDevice(connection_info=info)) is info
    assert policy.bdm_connection_info(_DriverBlockDevice()) == {}
    assert policy.bdm_connection_info(object()) == {}
    assert policy.agent_volume_id(
        _DriverBlockDevice(serial='s', data={})) == 's'
