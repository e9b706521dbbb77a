# SPDX-License-Identifier: Apache-2.0
"""nova_ext.virt: the libvirt driver of nova-compute with fcache.

Load it with ``[DEFAULT] compute_driver = fcache.FcacheLibvirtDriver``
(Nova imports ``nova.virt.<value>``; the package installs the re-exporting
module ``nova/virt/fcache/``).  Importing this package imports Nova.
"""
