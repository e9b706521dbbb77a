# SPDX-License-Identifier: Apache-2.0
"""cinder_ext.extra_specs and cinder_ext.policy (no Cinder needed)."""

import pytest

from cinder_ext import exception
from cinder_ext import extra_specs
from cinder_ext import policy


@pytest.mark.parametrize('key,value,expected', [
    ('fcache:strategy', 'hybrid', 'hybrid'),
    ('fcache:strategy', ' auto ', 'auto'),
    ('fcache:cache_size', '2G', 2 << 30),
    ('fcache:cache_size', '64KiB', 64 << 10),
    ('fcache:write_policy', 'write_back', 'write_back'),
    ('fcache:admission', 'rws', 'rws'),
    ('fcache:rws_n', '1', 1),
    ('fcache:rws_n', '3', 3),
    ('fcache:rws_n', ' 7 ', 7),
    ('fcache:staging', 'address', 'address'),
    ('fcache:staging', 'data', 'data'),
    ('fcache:staging', 'hybrid', 'hybrid'),
    ('fcache:rate_limit', '0', 0.0),
    ('fcache:rate_limit', '250.5', 250.5),
    ('fcache:storage_migration', 'slr', 'slr'),
    ('fcache:medium', 'ssd', 'ssd'),
    ('fcache:medium', ' hdd ', 'hdd'),
    ('fcache:wear_weight', '0', 0.0),
    ('fcache:wear_weight', '1', 1.0),
])
def test_valid_values_are_typed(key, value, expected):
    assert extra_specs.validate(key, value) == expected


@pytest.mark.parametrize('key,value,allowed', [
    ('fcache:strategy', 'warp', 'firepan_if'),
    ('fcache:cache_size', '0', 'positive size'),
    ('fcache:cache_size', '10 parsecs', 'positive size'),
    ('fcache:write_policy', 'write_around', 'write_through'),
    ('fcache:admission', 'some', 'one of all, rws'),
    ('fcache:rws_n', '0', 'from 1 to 7'),
    ('fcache:rws_n', '8', 'from 1 to 7'),
    ('fcache:rws_n', '1024', 'from 1 to 7'),
    ('fcache:rws_n', '2.5', 'from 1 to 7'),
    ('fcache:rws_n', '-1', 'from 1 to 7'),
    ('fcache:staging', 'lru', 'one of address, data, hybrid'),
    ('fcache:staging', 'Hybrid', 'one of address, data, hybrid'),
    ('fcache:staging', '', 'one of address, data, hybrid'),
    ('fcache:rate_limit', '-1', 'from 0 to'),
    ('fcache:rate_limit', 'fast', 'from 0 to'),
    ('fcache:storage_migration', 'teleport', 'dbt'),
    ('fcache:medium', 'nvme', 'one of ssd, hdd'),
    ('fcache:medium', 'SSD', 'one of ssd, hdd'),
    ('fcache:wear_weight', '1.01', 'from 0 to 1'),
    ('fcache:wear_weight', 'nan', 'from 0 to 1'),
])
def test_invalid_values_name_key_value_and_allowed(key, value, allowed):
    with pytest.raises(exception.InvalidExtraSpec) as err:
        extra_specs.validate(key, value)
    msg = str(err.value)
    assert key in msg
    assert repr(value) in msg
    assert allowed in msg


def test_unknown_key_lists_known_keys():
    with pytest.raises(exception.InvalidExtraSpec) as err:
        extra_specs.validate('fcache:colour', 'blue')
    assert 'unknown fcache key' in str(err.value)
    assert 'fcache:wear_weight' in str(err.value)


def test_every_issue_key_is_declared():
    assert set(extra_specs.VALIDATORS) == {
        'fcache:strategy', 'fcache:cache_size', 'fcache:write_policy',
        'fcache:admission', 'fcache:rws_n', 'fcache:rate_limit',
        'fcache:storage_migration', 'fcache:wear_weight',
        'fcache:staging', 'fcache:medium'}
    for validator in extra_specs.VALIDATORS.values():
        assert validator.description.endswith('.')


def test_strategies_include_installed_plugins():
    # The built-ins are registered as fcache.strategies entry points by
    # setup.cfg; the validator accepts what is installed.
    names = extra_specs.strategy_names()
    assert names[:7] == extra_specs.BUILTIN_STRATEGIES


def test_rws_n_out_of_range_says_why():
    with pytest.raises(exception.InvalidExtraSpec) as err:
        extra_specs.validate('fcache:rws_n', '8')
    msg = str(err.value)
    assert 'out of range' in msg
    assert 'RWS_7' in msg


def test_rws_policy_reaches_the_connection_data():
    data = {'cacheable': True}
    policy.add_to_connection_data(data, {'fcache:admission': 'rws',
                                         'fcache:rws_n': '2',
                                         'fcache:staging': 'address'})
    assert data['fcache'] == {'admission': 'rws', 'rws_n': 2,
                              'staging': 'address'}


def test_validate_specs_ignores_other_namespaces():
    specs = {'volume_backend_name': 'lvm', 'cacheable': '<is> True',
             'fcache:rate_limit': '100'}
    assert extra_specs.validate_specs(specs) == {'fcache:rate_limit': 100.0}


def test_validate_specs_refuses_whole_dict_on_one_bad_key():
    with pytest.raises(exception.InvalidExtraSpec):
        extra_specs.validate_specs({'fcache:strategy': 'hybrid',
                                    'fcache:rws_n': 'many'})


def test_policy_bridge_adds_unprefixed_policy():
    data = {'target_lun': 1, 'cacheable': True}
    policy.add_to_connection_data(data, {'fcache:strategy': 'firepan',
                                         'fcache:cache_size': '1G',
                                         'multiattach': '<is> False'})
    assert data == {'target_lun': 1, 'cacheable': True,
                    'fcache': {'strategy': 'firepan',
                               'cache_size': 1 << 30}}


def test_policy_bridge_adds_nothing_without_fcache_keys():
    data = {'cacheable': True}
    policy.add_to_connection_data(data, {'cacheable': '<is> True'})
    assert data == {'cacheable': True}


def test_policy_bridge_refuses_stored_invalid_spec():
    with pytest.raises(exception.InvalidExtraSpec):
        policy.add_to_connection_data({}, {'fcache:admission': 'nope'})
