# SPDX-License-Identifier: Apache-2.0
"""The agent's vocabulary, stated once for Python.

The names fcache-agent parses and the bounds it enforces, for the code
that checks a request before any agent sees it: cinder_ext on the Cinder
API (which has no agent to ask), the ``fcache`` command line, Nova's
driver, the Tempest plugin.  The agent publishes the same lists through
its ``capabilities`` operation, from the tables it parses with;
tests/functional/test_capabilities.py fails when the two differ.  The
strategies each have a descriptor in the agent
(fcache_agent/src/engine/strategy_<name>.c).
"""

from nova_ext import control_check

# In the agent's order (its enum fc_strategy).  ``auto`` is not one of
# them: nova_ext.costmodel resolves it before an agent is asked.
STRATEGIES = ('none', 'cachemior', 'firepan', 'firepan_if', 'cloudcache',
              'hybrid')
WRITE_POLICIES = ('read_only', 'write_through', 'write_back')
ADMISSIONS = ('all', 'rws')
STAGING_KINDS = ('address', 'data', 'hybrid')
# Storage move schemes, the paper's five and fcache's capped DBT (in the
# agent's order); an engine runs those its capabilities list (the kernel
# engine: mirror and lr).  ``auto`` is resolved by nova_ext.movecost, among the
# paper's five.
MOVE_SCHEMES = ('dbt', 'mirror', 'lr', 'slr', 'aio', 'dbt_capped')

# RWS_N's N for admission rws (the agent counts reuses up to RWS_7), and
# the longest demand window the agent accepts (30 days: longer is a unit
# mistake), from the agent's table of volume-attach's arguments.
RWS_N_MAX = control_check.bounds('volume-attach', 'rws_n')[1]
RWS_WINDOW_MAX_S = control_check.bounds('volume-attach', 'rws_window_s')[1]
