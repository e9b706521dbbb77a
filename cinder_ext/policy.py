# SPDX-License-Identifier: Apache-2.0
"""The bridge: a volume type's ``fcache:`` specs as a per-volume policy.

Cinder itself carries exactly one cache-related fact to nova-compute: the
``cacheable`` flag that ``VolumeManager._parse_connection_options`` puts in
``connection_info['data']`` from the volume type's ``cacheable`` spec.  We
put the ``fcache:`` policy next to it, under the key :data:`CONNECTION_KEY`,
as a plain dict without the prefix::

    connection_info['data']['fcache'] = {'strategy': 'firepan',
                                         'cache_size': 1073741824}

Only keys the type sets are carried; nova-compute fills the rest from its
``[fcache] default_*`` options, so a type with no ``fcache:`` keys (but
``cacheable='<is> True'``) is cached with the compute host's defaults.
"""

from cinder_ext import extra_specs

CONNECTION_KEY = 'fcache'


def policy_from_specs(specs):
    """Return the validated ``fcache:`` policy of ``specs``, unprefixed.

    :raises cinder_ext.exception.InvalidExtraSpec: a stored spec is invalid
        (set before this package validated, or edited in the database).
    """
    typed = extra_specs.validate_specs(specs)
    return {key[len(extra_specs.PREFIX):]: value
            for key, value in typed.items()}


def add_to_connection_data(data, specs):
    """Put the policy of ``specs`` into a connection_info data dict.

    ``data`` is ``connection_info['data']`` (initialize_connection) or the
    flat ``connection_info`` of an attachment (the attachments API flattens
    ``data``; Nova nests it again).  Nothing is added when the type has no
    ``fcache:`` keys.  Returns ``data``.
    """
    policy = policy_from_specs(specs)
    if policy:
        data[CONNECTION_KEY] = policy
    return data
