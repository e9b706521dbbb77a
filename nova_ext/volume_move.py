# SPDX-License-Identifier: Apache-2.0
"""Driving a live storage move through an agent.

Used by ``fcache volume-move`` and by the Nova driver's ``swap_volume``:
:func:`resolve_scheme` turns ``auto`` into a scheme with the metric of
:mod:`nova_ext.movecost`, :func:`start` asks the agent to move, and
:func:`wait` follows the move to its end, aborting it on timeout when
asked to.
"""

import errno
import logging
import math
import time

from nova_ext import agent
from nova_ext import exception
from nova_ext import movecost

LOG = logging.getLogger(__name__)

AUTO = 'auto'
SCHEMES = agent.MOVE_SCHEMES + (AUTO,)
DEFAULT_POLL_S = 1.0
# What the model assumes of the VM's I/O when nobody says (the paper's
# workloads read about three times what they write, Table 7); the size
# does not change the lambdas of the model, only their scale.
DEFAULT_WRITE_BPS = 10 * 1000 * 1000
DEFAULT_READ_BPS = 30 * 1000 * 1000
DEFAULT_SIZE_BYTES = 1 << 30
# Requests it keeps in flight: IOmeter's smaller OIO in Table 7.  With
# one, the model makes every request wait for the slower disk of the two
# in turn, and never finds SLR's balance (§5.3) for a VM that has more.
# The Nova driver's is [fcache] storage_move_in_flight, the CLI's
# --in-flight.
DEFAULT_DEPTH = 4


def agent_schemes(client):
    """The storage move schemes the agent behind ``client`` runs.

    Its ``capabilities`` list them as ``move_schemes``, from its engine
    (dmcache runs mirror and lr only).  An agent too old to report them
    (the key absent, or no ``capabilities`` operation at all) gets the
    full list, :data:`nova_ext.agent.MOVE_SCHEMES`: a scheme its engine
    does not run then reaches it, and it refuses the move saying which
    schemes it runs.
    """
    try:
        schemes = client.capabilities().get('move_schemes')
    except exception.AgentError as exc:
        if exc.errno != errno.EOPNOTSUPP:
            raise
        schemes = None
    if schemes is None:
        LOG.warning("The fcache agent at %s does not report the storage "
                    "move schemes it runs: assuming all of them (it "
                    "refuses one its engine does not run); upgrade it to "
                    "this fcache version", client.socket_path)
        return agent.MOVE_SCHEMES
    return tuple(schemes)


def resolve_scheme(scheme, from_medium, to_medium, wear_weight,
                   workload=None, schemes=None, agent_name='the agent'):
    """Return ``(scheme, auto)``: the scheme to run and, for ``auto``, why.

    ``auto`` is the scheme of lowest expected MC for the volume's wear
    weight (gamma) between the two media; ``auto`` is then ``{"chosen",
    "from_medium", "to_medium", "wear_weight", "expected": [Cost.as_dict()
    per scheme]}`` (``lambda_time`` and ``mc`` null for a scheme that
    would not finish), else None.

    ``schemes``, the schemes the agent runs (:func:`agent_schemes`;
    None: all of :data:`nova_ext.agent.MOVE_SCHEMES`), limits the choice
    and refuses another scheme named outright; ``agent_name`` says which
    agent in that refusal ("the fcache agent on cmp1").

    :raises nova_ext.exception.InvalidArgument: an unknown scheme, medium,
        a wear weight outside 0..1, or a scheme the agent does not run.
    """
    if scheme not in SCHEMES:
        raise exception.InvalidArgument(
            name='scheme', value=scheme,
            reason='must be one of %s' % ', '.join(SCHEMES))
    allowed = agent.MOVE_SCHEMES if schemes is None else tuple(schemes)
    if not allowed:
        raise exception.InvalidArgument(
            name='scheme', value=scheme,
            reason='%s runs no storage move: its engine has none' %
            agent_name)
    if scheme not in allowed + (AUTO,):
        raise exception.InvalidArgument(
            name='scheme', value=scheme,
            reason='%s runs only %s: name one of them or auto' % (
                agent_name, ', '.join(allowed)))
    if scheme != AUTO:
        return scheme, None
    if workload is None:
        workload = assumed_workload()
    try:
        # auto chooses among the paper's schemes; fcache's own
        # (dbt_capped, which may fail) only run when named.
        chosen, costs = movecost.choose_scheme(
            from_medium, to_medium, workload, wear_weight,
            tuple(s for s in allowed if s in movecost.SCHEMES))
    except ValueError as exc:
        raise exception.InvalidArgument(name='auto', value=scheme,
                                        reason=str(exc))
    LOG.debug("auto storage move scheme %(scheme)s from %(src)s to "
              "%(dst)s at wear weight %(gamma)s",
              {'scheme': chosen, 'src': from_medium, 'dst': to_medium,
               'gamma': wear_weight})
    return chosen, {'chosen': chosen, 'from_medium': from_medium,
                    'to_medium': to_medium, 'wear_weight': wear_weight,
                    'expected': [_finite(c.as_dict()) for c in costs]}


def _finite(cost):
    """A cost for JSON: a move that would not finish has null figures."""
    return dict((k, None if isinstance(v, float) and math.isinf(v) else v)
                for k, v in cost.items())


def assumed_workload(write_mbps=None, read_mbps=None, ssd_mbps=None,
                     hdd_mbps=None, depth=None):
    """The :class:`~nova_ext.movecost.Workload` ``auto`` assumes.

    Rates in MB/s; None takes the default (10 MB/s of writes, reads three
    times the writes, the media's default bandwidths, :data:`DEFAULT_DEPTH`
    requests in flight).

    :raises nova_ext.exception.InvalidArgument: a rate is not a positive
        number.
    """
    write = DEFAULT_WRITE_BPS if write_mbps is None else write_mbps * 1e6
    if read_mbps is not None:
        read = read_mbps * 1e6
    elif write_mbps is not None:
        read = 3 * write
    else:
        read = DEFAULT_READ_BPS
    bandwidth = {}
    for medium, mbps in (('ssd', ssd_mbps), ('hdd', hdd_mbps)):
        if mbps is not None:
            bandwidth[medium] = mbps * 1e6
    try:
        return movecost.Workload(
            DEFAULT_SIZE_BYTES, write, read, bandwidth_bps=bandwidth,
            depth=DEFAULT_DEPTH if depth is None else depth)
    except ValueError as exc:
        raise exception.InvalidArgument(name='workload', value=write_mbps,
                                        reason=str(exc))


def wait(client, volume_id, to, timeout_s, poll_s=DEFAULT_POLL_S,
         progress=None, abort_on_timeout=False, clock=time.monotonic,
         sleep=time.sleep):
    """Follow the move of ``volume_id`` until it is done; return its status.

    ``progress(status)`` is called after every poll.  A move that ends
    ``failed`` or ``aborted`` raises StorageMoveFailed with the agent's
    error.  After ``timeout_s`` seconds it raises StorageMoveTimeout,
    having first aborted the move if ``abort_on_timeout`` (the source
    then keeps serving); otherwise the move goes on in the agent.
    """
    deadline = clock() + timeout_s
    while True:
        status = client.move_status(volume_id)
        if progress is not None:
            progress(status)
        state = status.get('state')
        if state == 'done':
            return status
        if state in ('failed', 'aborted'):
            raise exception.StorageMoveFailed(
                volume_id=volume_id, to=to, state=state,
                reason=status.get('error') or 'the agent gave no reason')
        if clock() >= deadline:
            if abort_on_timeout:
                LOG.warning("Aborting the storage move of volume "
                            "%(volume)s after %(timeout)s s",
                            {'volume': volume_id, 'timeout': timeout_s})
                client.abort_move(volume_id)
                action = 'it was aborted and the old origin keeps serving'
            else:
                action = ('it goes on: follow it with fcache '
                          'volume-move-status %s or stop it with fcache '
                          'volume-move-abort %s' % (volume_id, volume_id))
            raise exception.StorageMoveTimeout(
                volume_id=volume_id, to=to, state=state, timeout=timeout_s,
                copied=status.get('bytes_copied'),
                total=status.get('bytes_total'), action=action)
        sleep(min(poll_s, max(0.0, deadline - clock())))
