# SPDX-License-Identifier: Apache-2.0
"""Fleet simulation: the balancer and the evacuation planner at scale.

``python3 -m bench.fleet`` runs the decision code of
:mod:`nova_ext.balancer` (imported, not copied) against a simulated cloud
whose VMs' cache demand comes from the trace generator's shapes
(:mod:`bench.fleet.workload`) and whose migrations cost what the testbed
measured (:mod:`bench.fleet.constants`).  doc/research/fleet.rst has the
results.
"""
