# SPDX-License-Identifier: Apache-2.0
"""cinder_ext.writeback: which write policy a host caches a volume with."""

import pytest

from cinder_ext import writeback

WB = {'cacheable': '<is> True', 'fcache:write_policy': 'write_back'}
WT = {'cacheable': '<is> True', 'fcache:write_policy': 'write_through'}


def test_riskier_orders_the_policies():
    assert writeback.riskier(None, 'read_only') == 'read_only'
    assert writeback.riskier('read_only', 'write_through') == 'write_through'
    assert writeback.riskier('write_through',
                             writeback.COMPUTE_DEFAULT) == \
        writeback.COMPUTE_DEFAULT
    assert writeback.riskier(writeback.COMPUTE_DEFAULT, 'write_back',
                             'read_only') == 'write_back'


def test_riskier_takes_an_unknown_policy_as_write_back():
    # A policy this version does not know must not let a read through.
    assert writeback.riskier('write_through', 'write_sideways') == \
        'write_sideways'


@pytest.mark.parametrize('info, expected', [
    ({'cacheable': True, 'fcache': {'write_policy': 'write_back'}},
     'write_back'),
    ({'cacheable': True, 'fcache': {'strategy': 'hybrid'}},
     writeback.COMPUTE_DEFAULT),
    ({'cacheable': True}, writeback.COMPUTE_DEFAULT),
    # Nova's driver caches only on a literal True.
    ({'cacheable': 'True', 'fcache': {'write_policy': 'write_back'}}, None),
    ({'cacheable': False, 'fcache': {'write_policy': 'write_back'}}, None),
    ({'fcache': {'write_policy': 'write_back'}}, None),
    (None, None),
])
def test_handed_policy(info, expected):
    assert writeback.handed_policy(info) == expected


@pytest.mark.parametrize('specs, expected', [
    (WB, 'write_back'),
    (WT, 'write_through'),
    ({'cacheable': '<is> True'}, writeback.COMPUTE_DEFAULT),
    ({'cacheable': '<is> True', 'fcache:write_policy': ' read_only '},
     'read_only'),
    # Every attach of this type fails: nothing is cached under it.
    ({'cacheable': '<is> True', 'fcache:write_policy': 'sideways'}, None),
    ({'fcache:write_policy': 'write_back'}, None),
    ({'cacheable': 'True', 'fcache:write_policy': 'write_back'}, None),
    ({}, None),
    (None, None),
])
def test_type_policy(specs, expected):
    assert writeback.type_policy(specs) == expected


def test_the_record_wins_over_the_type():
    info = {writeback.HOST_POLICY_KEY: 'write_back'}
    assert writeback.attachment_policy(info, WT) == 'write_back'
    info = {writeback.HOST_POLICY_KEY: 'write_through'}
    assert writeback.attachment_policy(info, WB) == 'write_through'
    # Recorded as not cached: the host does not cache it.
    info = {writeback.HOST_POLICY_KEY: None}
    assert writeback.attachment_policy(info, WB) is None


def test_without_record_the_type_decides():
    assert writeback.attachment_policy({'cacheable': True}, WB) == \
        'write_back'
    assert writeback.attachment_policy(None, WT) == 'write_through'


def test_resolve_the_compute_default():
    assert writeback.resolve(writeback.COMPUTE_DEFAULT,
                             'write_back') == 'write_back'
    assert writeback.resolve(writeback.COMPUTE_DEFAULT,
                             'write_through') == 'write_through'
    assert writeback.resolve('read_only', 'write_back') == 'read_only'
    assert writeback.resolve(None, 'write_back') is None


@pytest.mark.parametrize('status, active', [
    ('attaching', True), ('attached', True), ('error_attaching', True),
    ('error_detaching', True), ('reserved', False), ('detached', False),
    ('deleted', False), (None, False),
])
def test_active_attachments(status, active):
    assert writeback.is_active(status) is active
