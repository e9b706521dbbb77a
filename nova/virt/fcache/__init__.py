# SPDX-License-Identifier: Apache-2.0
"""``[DEFAULT] compute_driver = fcache.FcacheLibvirtDriver``.

Nova loads its driver as ``nova.virt.<compute_driver>``; this module, the
only file fcache installs into Nova's package tree, re-exports the driver
that lives in :mod:`nova_ext.virt.driver`.  (No ``nova/__init__.py`` or
``nova/virt/__init__.py`` here: Nova's own are used.)
"""

from nova_ext.virt.driver import FcacheLibvirtDriver  # noqa: F401
