# SPDX-License-Identifier: Apache-2.0
"""Which write policy a compute host caches an attached volume with.

With ``write_back`` the compute host's cache holds the only copy of what
the guest wrote, flushes included, until the agent writes it back to the
volume (on its own, or at the latest when the volume is detached).
Whatever Cinder reads from the volume meanwhile -- a snapshot, a backup,
a clone, an image upload -- lacks those writes.  cinder-api cannot have
the host write them back first (``doc/admin/operations.rst``, "Every server and
volume action, per write policy", says why), so :mod:`cinder_ext.api`
refuses those actions while this module says the volume may hold such
writes on a host.

The volume type alone is not enough to tell.  The host keeps the policy
it attached the volume with: a retype of an in-use volume (done in place
by the back-end, or by Nova's ``swap_volume``, where the agent moves the
volume under the same cache) and a live migration (the destination agent
takes the source agent's write policy) do not change it.  So every
attachment records, in its connection_info in Cinder's database, the
policy its host caches with (:data:`HOST_POLICY_KEY`), and a new
attachment of a volume that another host (or the same one) still caches
inherits the riskier of the two.  Attachments made before that record
existed fall back to the volume's current type.

Pure Python, without Cinder, so that the rules can be tested alone.
"""

from cinder_ext import exception
from cinder_ext import extra_specs

# In the flat connection_info Cinder keeps per attachment.
HOST_POLICY_KEY = 'fcache_host_write_policy'
# A cacheable type without fcache:write_policy: nova.conf's
# [fcache] default_write_policy on the compute host decides.
COMPUTE_DEFAULT = 'compute_default'
WRITE_BACK = 'write_back'

# Attachments whose host may have connected the volume, and so may cache
# it.  'reserved' has no connector yet (or no longer: a shelved-offloaded
# server), 'detached' and 'deleted' are gone: their host wrote every
# cached write back before Nova let the attachment go.
ACTIVE_ATTACH_STATUSES = ('attaching', 'attached', 'error_attaching',
                          'error_detaching')

# How far the volume itself may lag behind what the guest flushed; the
# compute default ranks below write_back but above the rest, since it
# may be write_back.
_RISK = {None: 0, 'read_only': 1, 'write_through': 2, COMPUTE_DEFAULT: 3,
         WRITE_BACK: 4}


def riskier(*policies):
    """The policy under which the volume may lag furthest behind."""
    return max(policies, key=lambda p: _RISK.get(p, _RISK[WRITE_BACK]))


def handed_policy(connection_info):
    """The write policy a host caches with, from what Cinder handed it.

    :param connection_info: the flat connection_info of an attachment, as
        the attachments API returns it: ``cacheable`` (Cinder's, from the
        type and the driver) and ``fcache`` (:mod:`cinder_ext.policy`).
    :returns: ``None`` (not cached), a write policy, or
        :data:`COMPUTE_DEFAULT`.
    """
    if not isinstance(connection_info, dict):
        return None
    # nova_ext caches only on a literal True, as Nova receives it.
    if connection_info.get('cacheable') is not True:
        return None
    given = connection_info.get('fcache') or {}
    return given.get('write_policy') or COMPUTE_DEFAULT


def type_policy(specs):
    """The write policy a host would cache a volume of this type with.

    Only for attachments that carry no record.  A spec that does not
    validate makes every attach fail (:mod:`cinder_ext.api`), so nothing
    is cached under it.
    """
    specs = specs or {}
    if specs.get('cacheable') != '<is> True':
        return None
    value = specs.get(extra_specs.PREFIX + 'write_policy')
    if value is None:
        return COMPUTE_DEFAULT
    try:
        return extra_specs.validate(extra_specs.PREFIX + 'write_policy',
                                    value)
    except exception.InvalidExtraSpec:
        return None


def attachment_policy(connection_info, specs):
    """The write policy of one attachment: its record, else its type's."""
    if isinstance(connection_info, dict) and HOST_POLICY_KEY in \
            connection_info:
        return connection_info[HOST_POLICY_KEY]
    return type_policy(specs)


def resolve(policy, compute_default):
    """Replace :data:`COMPUTE_DEFAULT` by what cinder.conf says it is."""
    return compute_default if policy == COMPUTE_DEFAULT else policy


def is_active(attach_status):
    return attach_status in ACTIVE_ATTACH_STATUSES
