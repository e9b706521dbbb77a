# SPDX-License-Identifier: Apache-2.0
"""When to move a VM, which one, and where to (CloudCache section 6).

*When*: a host whose cache demand (the sum of its VMs' predicted RWSS)
exceeds ``threshold`` (90 %) of its capacity for ``windows`` (3)
consecutive allocation windows; the 10 % left is a buffer for short
surges, and the run of windows keeps a passing peak from moving VMs.

*Which VM and where*: every move of one of that host's VMs to another host
that can hold the VM's demand under the threshold is evaluated, and the one
that minimises the variance of the hosts' cache utilisation (demand over
capacity, so that hosts with caches of different sizes compare) wins.

The evaluation is incremental: with ``S1 = sum(u)`` and ``S2 = sum(u^2)``
over the ``n`` hosts, moving demand ``d`` from host ``s`` to host ``t``
changes only ``u_s`` and ``u_t``, so the variance after the move,
``S2'/n - (S1'/n)^2``, costs O(1).  Among destinations with the same
capacity the least loaded one is always the best (the variance grows with
``u_t``), so only one candidate per distinct capacity is evaluated: a
decision costs O(VMs on the host x distinct capacities), not
O(VMs x hosts).

Not chosen: a VM Nova is migrating, a VM moved in the last
``cooldown_windows`` windows (its demand on the new host is not yet
measured), a VM with no demand (moving it changes nothing), a move that
does not lower the variance.

:class:`Balancer` is deterministic and stateful only in its per-host
over-threshold counters and the windows in which it moved VMs.
"""

import bisect

DEFAULT_THRESHOLD = 0.9
DEFAULT_WINDOWS = 3
DEFAULT_COOLDOWN_WINDOWS = 6


class Decision(object):
    """One move: ``vm`` from ``source`` to ``destination``.

    ``variance_before``/``variance_after`` are the variance of the hosts'
    utilisation (demand / capacity) before and after the move; ``reason``
    says it in a sentence an operator can read.
    """

    __slots__ = ('vm', 'source', 'destination', 'variance_before',
                 'variance_after', 'reason', 'window', 'source_load',
                 'source_capacity', 'destination_load',
                 'destination_capacity', 'over_windows')

    def __init__(self, vm, source, destination, variance_before,
                 variance_after, reason, window=None, source_load=None,
                 source_capacity=None, destination_load=None,
                 destination_capacity=None, over_windows=None):
        self.vm = vm
        self.source = source
        self.destination = destination
        self.variance_before = variance_before
        self.variance_after = variance_after
        self.reason = reason
        self.window = window
        self.source_load = source_load
        self.source_capacity = source_capacity
        self.destination_load = destination_load
        self.destination_capacity = destination_capacity
        self.over_windows = over_windows

    def as_dict(self):
        """A JSON-able summary (the notification payload)."""
        return {'vm': self.vm.id, 'vm_name': self.vm.name,
                'demand_bytes': self.vm.demand_bytes,
                'source': self.source, 'destination': self.destination,
                'variance_before': self.variance_before,
                'variance_after': self.variance_after,
                'source_load_bytes': self.source_load,
                'source_capacity_bytes': self.source_capacity,
                'destination_load_bytes': self.destination_load,
                'destination_capacity_bytes': self.destination_capacity,
                'over_windows': self.over_windows,
                'window': self.window, 'reason': self.reason}

    def __repr__(self):
        return 'Decision(%s: %s -> %s, var %.6f -> %.6f)' % (
            self.vm.id, self.source, self.destination, self.variance_before,
            self.variance_after)


def variance(values):
    """Population variance of ``values`` (two passes)."""
    values = list(values)
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


class _Cloud(object):
    """Utilisation sums and per-capacity destination lists, updatable."""

    def __init__(self, hosts, vms):
        self.hosts = {h.name: h for h in hosts if h.capacity_bytes > 0}
        self.load = {name: 0 for name in self.hosts}
        self.vms_on = {name: [] for name in self.hosts}
        for vm in vms:
            if vm.host in self.load:
                self.load[vm.host] += vm.demand_bytes
                self.vms_on[vm.host].append(vm)
        self.n = len(self.hosts)
        self.u = {name: self.load[name] / h.capacity_bytes
                  for name, h in self.hosts.items()}
        self.s1 = sum(self.u.values())
        self.var = variance(self.u.values())
        # capacity -> sorted [(utilisation, name)] of accepting hosts.
        self.classes = {}
        for name, h in self.hosts.items():
            if h.accepts:
                self.classes.setdefault(h.capacity_bytes, []).append(
                    (self.u[name], name))
        for entries in self.classes.values():
            entries.sort()

    def variance_delta(self, changes):
        """Variance change for ``{name: new utilisation}`` (O(len))."""
        d1 = d2 = 0.0
        for name, new in changes.items():
            old = self.u[name]
            d1 += new - old
            d2 += new * new - old * old
        n = self.n
        return d2 / n - ((self.s1 + d1) ** 2 - self.s1 ** 2) / (n * n)

    def move(self, vm, source, destination):
        """Apply a decided move to the sums and the lists."""
        changes = {source: (self.load[source] - vm.demand_bytes) /
                   self.hosts[source].capacity_bytes,
                   destination: (self.load[destination] + vm.demand_bytes) /
                   self.hosts[destination].capacity_bytes}
        self.var += self.variance_delta(changes)
        for name, new in changes.items():
            h = self.hosts[name]
            if h.accepts:
                entries = self.classes[h.capacity_bytes]
                del entries[bisect.bisect_left(entries, (self.u[name],
                                                         name))]
                bisect.insort(entries, (new, name))
            self.s1 += new - self.u[name]
            self.u[name] = new
        self.load[source] -= vm.demand_bytes
        self.load[destination] += vm.demand_bytes
        self.vms_on[source].remove(vm)
        self.vms_on[destination].append(vm)


class Balancer(object):
    """Decide, window after window, which VM to live-migrate where.

    :param threshold: fraction of a host's cache capacity its demand may
        reach; above it for ``windows`` consecutive windows, a VM moves.
    :param windows: consecutive over-threshold windows before a move.
    :param cooldown_windows: a VM moved in window ``w`` is not moved again
        before window ``w + cooldown_windows + 1``.
    """

    def __init__(self, threshold=DEFAULT_THRESHOLD, windows=DEFAULT_WINDOWS,
                 cooldown_windows=DEFAULT_COOLDOWN_WINDOWS):
        if not 0 < threshold <= 1:
            raise ValueError('threshold must be in (0, 1], not %r'
                             % (threshold,))
        if windows < 1:
            raise ValueError('windows must be at least 1, not %r'
                             % (windows,))
        if cooldown_windows < 0:
            raise ValueError('cooldown_windows must be >= 0, not %r'
                             % (cooldown_windows,))
        self.threshold = threshold
        self.windows = windows
        self.cooldown_windows = cooldown_windows
        self._over = {}         # host -> consecutive over-threshold windows
        self._seen = {}         # host -> last window counted
        self._moved = {}        # vm id -> window the balancer moved it in
        #: ``[(host, reason)]``: over-threshold hosts of the last
        #: observation for which no move was decided, and why.
        self.skipped = []

    # -- state -------------------------------------------------------------
    def over_windows(self, host):
        """Consecutive windows ``host`` has been over the threshold."""
        return self._over.get(host, 0)

    def record_move(self, vm_id, window):
        """Note a move made outside :meth:`observe` (cool-down applies)."""
        self._moved[vm_id] = window

    def _count(self, window, cloud):
        triggered = []
        for name, h in cloud.hosts.items():
            over = cloud.load[name] > self.threshold * h.capacity_bytes
            last = self._seen.get(name)
            if last == window:
                count = self._over.get(name, 0)     # already counted
            elif not over:
                count = 0
            elif last is not None and last == window - 1:
                count = self._over.get(name, 0) + 1
            else:
                count = 1
            self._seen[name] = window
            self._over[name] = count
            if count >= self.windows:
                triggered.append(name)
        # The most utilised host first; names break ties.
        triggered.sort(key=lambda name: (-cloud.u[name], name))
        for name in set(self._over) - set(cloud.hosts):
            del self._over[name]
            self._seen.pop(name, None)
        return triggered

    def _movable(self, vm, window):
        if vm.migrating or vm.demand_bytes <= 0:
            return False
        for moved in (vm.last_moved_window, self._moved.get(vm.id)):
            if moved is not None and window - moved <= self.cooldown_windows:
                return False
        return True

    # -- decisions ---------------------------------------------------------
    def _best_move(self, window, cloud, source):
        src = cloud.hosts[source]
        best = None
        movable = [vm for vm in cloud.vms_on[source]
                   if self._movable(vm, window)]
        if not movable:
            return None, ('none of its %d VMs can move (migrating, moved '
                          'in the last %d windows, or no demand)'
                          % (len(cloud.vms_on[source]),
                             self.cooldown_windows))
        fits_somewhere = False
        for vm in movable:
            d = vm.demand_bytes
            u_s = (cloud.load[source] - d) / src.capacity_bytes
            for capacity, entries in cloud.classes.items():
                for u_t, name in entries[:2]:
                    if name != source:
                        break
                else:
                    continue
                if cloud.load[name] + d > self.threshold * capacity:
                    continue
                fits_somewhere = True
                delta = cloud.variance_delta(
                    {source: u_s, name: u_t + d / capacity})
                key = (delta, vm.id, name)
                if best is None or key < best[0]:
                    best = (key, vm, name)
        if best is None:
            return None, ('no other host can take any of its %d movable '
                          'VMs under %.0f %% of its capacity'
                          % (len(movable), self.threshold * 100))
        (delta, _, _), vm, name = best
        if delta >= 0:
            assert fits_somewhere
            return None, 'no move lowers the variance of the cache load'
        return (vm, name, delta), None

    def observe_many(self, window, hosts, vms, max_moves=None):
        """Observe one window; return up to ``max_moves`` decisions.

        Each over-threshold host (most utilised first) gets at most one
        move per window; each decision is applied to the loads before the
        next is evaluated, so decisions never overfill a destination
        together.
        """
        cloud = _Cloud(hosts, vms)
        self.skipped = []
        decisions = []
        for source in self._count(window, cloud):
            if max_moves is not None and len(decisions) >= max_moves:
                break
            found, why = self._best_move(window, cloud, source)
            if found is None:
                self.skipped.append((source, why))
                continue
            vm, destination, delta = found
            before = cloud.var
            src_load = cloud.load[source]
            dst_load = cloud.load[destination]
            src_cap = cloud.hosts[source].capacity_bytes
            dst_cap = cloud.hosts[destination].capacity_bytes
            over = self._over[source]
            cloud.move(vm, source, destination)
            reason = (
                '%s demand %d bytes above %.0f %% of its %d-byte cache for '
                '%d windows; moving %s (%d bytes of predicted demand) to %s '
                '(%d of %d bytes in use) lowers the variance of cache '
                'utilisation from %.6f to %.6f, the most of all moves'
                % (source, src_load, self.threshold * 100, src_cap, over,
                   vm.id, vm.demand_bytes, destination, dst_load, dst_cap,
                   before, cloud.var))
            decisions.append(Decision(
                vm, source, destination, before, max(cloud.var, 0.0),
                reason, window=window, source_load=src_load,
                source_capacity=src_cap, destination_load=dst_load,
                destination_capacity=dst_cap, over_windows=over))
            self._moved[vm.id] = window
            # The next move off this host needs a new run of windows.
            self._over[source] = 0
        return decisions

    def observe(self, window, hosts, vms):
        """Observe one window; return a :class:`Decision` or None."""
        decisions = self.observe_many(window, hosts, vms, max_moves=1)
        return decisions[0] if decisions else None
