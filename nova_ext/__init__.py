# SPDX-License-Identifier: Apache-2.0
"""fcache: host-side flash cache for Cinder volumes, Nova side.

This package runs inside nova-compute and in the ``fcache`` command line
tool.  It never touches cache data itself: every byte and every cache
decision belongs to the local ``fcache-agent`` (the C data-plane agent),
which this package drives over its control socket (:mod:`nova_ext.agent`).
"""
