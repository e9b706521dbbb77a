"""fcache: host-side flash cache for Cinder volumes, Cinder side.

Empty for now.  This package will hold what Cinder and its operators need:

* the ``fcache:*`` volume type extra-spec schema (``fcache:strategy``,
  ``fcache:write_policy``, ``fcache:admission``, ``fcache:cache_size``, ...),
  one declared validator per key, in the shape of Nova's
  ``nova/api/validation/extra_specs/``;
* the bridge that carries a volume's policy into its ``connection_info`` so
  that nova-compute (``nova_ext``) can read it, as Cinder's own
  ``cacheable`` spec does for Nova's volume local cache;
* operator tooling for inspecting and changing those policies.
"""
