# SPDX-License-Identifier: Apache-2.0
"""fcache: host-side flash cache for Cinder volumes, Cinder side.

* :mod:`cinder_ext.extra_specs` -- the ``fcache:*`` volume-type extra-spec
  namespace, one declared validator per key (the shape of Nova's
  ``nova/api/validation/extra_specs/``).  Pure Python: usable by tooling
  without Cinder installed.
* :mod:`cinder_ext.policy` -- the bridge: turns a volume type's extra specs
  into the policy that reaches nova-compute in the volume's
  ``connection_info`` (next to Cinder's own ``cacheable`` flag).
* :mod:`cinder_ext.api` -- the cinder-api extension (loaded through
  ``[DEFAULT] osapi_volume_extension``) that validates ``fcache:*`` keys when
  an operator sets them and adds the policy to every ``connection_info``
  the API hands out.  Imports Cinder; only cinder-api loads it.
"""
