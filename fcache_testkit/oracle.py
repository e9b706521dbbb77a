# SPDX-License-Identifier: Apache-2.0
"""An oracle-checked NBD workload, driven through libnbd's asynchronous API.

The oracle is a bytearray model of the whole disk plus one "known" flag per
512-byte sector.  A write, once acknowledged, updates the model; a
write_zeroes makes its range zero; a trim makes its range unknown (the
protocol lets a trimmed range read back as anything) until it is written
again.  Every read is compared, sector by sector over the known sectors,
with the model: the last acknowledged write, or the origin's initial data.

Many requests are in flight at once, but never two whose ranges overlap:
NBD gives no ordering between overlapping in-flight requests, so such a
pair would have no single correct answer.  Flushes (which have no range)
are in flight alongside anything.

Offsets follow a hot-zone distribution (like fio's ``zoned`` random
distribution, 80 % of the requests in 20 % of the disk by default) so a
cache smaller than the data both hits and evicts.
"""

import random
import threading
import time

import nbd

SECTOR = 512


class Mismatch(object):
    def __init__(self, offset, length, sector_offset, bad_sectors, expected,
                 got, what='read'):
        self.offset = offset
        self.length = length
        self.sector_offset = sector_offset
        self.bad_sectors = bad_sectors
        self.expected = expected
        self.got = got
        self.what = what

    def __repr__(self):
        def hx(b):
            return b[:16].hex()
        kind = ''
        if self.got == bytes(len(self.got)):
            kind = ' (read back zeroes)'
        return ('%s of %d bytes at %d: %d bad sector(s), first at %d: '
                'expected %s.. got %s..%s' % (
                    self.what, self.length, self.offset, self.bad_sectors,
                    self.sector_offset, hx(self.expected), hx(self.got),
                    kind))


class Oracle(object):
    """The model of the disk."""

    def __init__(self, content):
        assert len(content) % SECTOR == 0
        self.data = bytearray(content)
        self.size = len(content)
        self.known = bytearray(b'\x01') * (self.size // SECTOR)

    def write(self, off, data):
        self.data[off:off + len(data)] = data
        self._set_known(off, len(data), 1)

    def zero(self, off, length):
        self.data[off:off + length] = bytes(length)
        self._set_known(off, length, 1)

    def grow(self, size):
        """The disk grew to ``size``: the extension reads as zeroes."""
        assert size >= self.size and size % SECTOR == 0
        self.data.extend(bytes(size - self.size))
        self.known.extend(b'\x01' * ((size - self.size) // SECTOR))
        self.size = size

    def forget(self, off, length):
        """The range may now read back as anything (trim, lost request)."""
        self._set_known(off, length, 0)

    def _set_known(self, off, length, v):
        s0 = off // SECTOR
        s1 = (off + length + SECTOR - 1) // SECTOR
        self.known[s0:s1] = bytes([v]) * (s1 - s0)

    def known_fraction(self):
        return self.known.count(1) / float(len(self.known))

    def check(self, off, got, what='read'):
        """Return None or a Mismatch for data ``got`` read at ``off``."""
        n = len(got)
        exp = self.data[off:off + n]
        if exp == got:
            return None
        s0 = off // SECTOR
        bad = 0
        first = None
        first_exp = first_got = b''
        for i in range(n // SECTOR):
            if not self.known[s0 + i]:
                continue
            a = i * SECTOR
            e = exp[a:a + SECTOR]
            g = got[a:a + SECTOR]
            if e != g:
                bad += 1
                if first is None:
                    first = off + a
                    first_exp, first_got = bytes(e), bytes(g)
        if not bad:
            return None
        return Mismatch(off, n, first, bad, first_exp, first_got, what)


class Request(object):
    __slots__ = ('kind', 'offset', 'length', 'buf', 'payload', 'fua',
                 'issued')

    def __init__(self, kind, offset, length, buf=None, payload=None,
                 fua=False):
        self.kind = kind
        self.offset = offset
        self.length = length
        self.buf = buf
        self.payload = payload
        self.fua = fua
        self.issued = time.monotonic()


DEFAULT_MIX = (('read', 45), ('write', 40), ('zero', 5), ('trim', 4),
               ('flush', 2))


class Workload(object):
    """Random requests against one libnbd handle, checked by the oracle.

    ``disconnect_expected`` (a threading.Event) is set by whoever kills the
    server: from then on failed requests are "lost" (their ranges become
    unknown when they could have changed data) instead of errors.
    """

    def __init__(self, handle, oracle, seed, depth=16, mix=DEFAULT_MIX,
                 hot_fraction=0.2, hot_share=0.8, hot_start=None,
                 fua_share=0.1, unaligned_share=0.25, max_length=65536,
                 block=4096, region=None, tolerate_errors=False):
        self.h = handle
        # With tolerate_errors, a request the server fails is not a test
        # failure (the origin is injecting errors): a failed write leaves
        # its range unknown, a failed read checks nothing.
        self.tolerate_errors = tolerate_errors
        self.failed = 0
        self.oracle = oracle
        self.rng = random.Random(seed)
        self.depth = depth
        self.kinds = [k for k, _ in mix]
        self.weights = [w for _, w in mix]
        self.fua_share = fua_share
        self.unaligned_share = unaligned_share
        self.max_length = max_length
        self.block = block
        lo, hi = region if region else (0, oracle.size)
        self.region = (lo, hi)
        hot_len = max(block, int((hi - lo) * hot_fraction) // block * block)
        if hot_start is None:
            hot_start = lo + self.rng.randrange(
                0, (hi - lo - hot_len) // block + 1) * block
        self.hot = (hot_start, hot_start + hot_len)
        self.hot_share = hot_share
        self.inflight = {}          # id(req) -> req
        self.completed = []         # (req, errno) from callbacks
        self.disconnect_expected = threading.Event()
        self.dead = False
        self.counts = dict.fromkeys(
            ('read', 'write', 'zero', 'trim', 'flush', 'fua'), 0)
        self.read_bytes = 0
        self.write_bytes = 0
        self.unaligned = 0
        self.errors = []
        self.mismatches = []
        self.lost = 0
        self.inflight_at_death = 0
        self.max_inflight = 0

    # -- request generation ----------------------------------------------

    def _length(self, unit):
        r = self.rng.random()
        if unit == SECTOR:
            units = self.rng.randint(1, self.max_length // SECTOR)
            if r < 0.6:
                units = self.rng.randint(1, 16)
            return units * SECTOR
        if r < 0.55:
            units = 1
        elif r < 0.8:
            units = self.rng.randint(2, 4)
        else:
            units = self.rng.randint(5, self.max_length // unit)
        return units * unit

    def _range(self):
        unaligned = self.rng.random() < self.unaligned_share
        unit = SECTOR if unaligned else self.block
        length = self._length(unit)
        lo, hi = self.hot if self.rng.random() < self.hot_share else \
            self.region
        length = min(length, (hi - lo) // unit * unit)
        slots = (hi - lo - length) // unit
        off = lo + self.rng.randint(0, slots) * unit
        if unaligned and (off % self.block or length % self.block):
            self.unaligned += 1
        return off, length

    def _overlaps(self, off, length):
        end = off + length
        for r in self.inflight.values():
            if r.length and off < r.offset + r.length and r.offset < end:
                return True
        return False

    def _completion(self, req):
        def cb(err):
            self.completed.append((req, err.value))
            return 1
        return cb

    def _issue_one(self):
        kind = self.rng.choices(self.kinds, self.weights)[0]
        if kind == 'flush':
            req = Request('flush', 0, 0)
        else:
            for _ in range(8):
                off, length = self._range()
                if not self._overlaps(off, length):
                    break
            else:
                return False
            req = Request(kind, off, length)
        flags = 0
        if kind in ('write', 'zero', 'trim') and \
                self.rng.random() < self.fua_share:
            flags = nbd.CMD_FLAG_FUA
            req.fua = True
        cb = self._completion(req)
        self.inflight[id(req)] = req
        try:
            if kind == 'read':
                req.buf = nbd.Buffer(req.length)
                self.h.aio_pread(req.buf, req.offset, completion=cb)
            elif kind == 'write':
                req.payload = self.rng.randbytes(req.length)
                req.buf = nbd.Buffer.from_bytearray(req.payload)
                self.h.aio_pwrite(req.buf, req.offset, completion=cb,
                                  flags=flags)
            elif kind == 'zero':
                self.h.aio_zero(req.length, req.offset, completion=cb,
                                flags=flags)
            elif kind == 'trim':
                self.h.aio_trim(req.length, req.offset, completion=cb,
                                flags=flags)
            else:
                self.h.aio_flush(completion=cb)
        except nbd.Error as exc:
            del self.inflight[id(req)]
            if self._handle_dead():
                # Never reached the server: nothing to forget.
                self._mark_dead()
            else:
                self._failed(req, exc.errno or -1, 'issue: %s' % exc)
            return False
        self.counts[kind] += 1
        self.counts['fua'] += req.fua
        self.max_inflight = max(self.max_inflight, len(self.inflight))
        return True

    # -- completions -------------------------------------------------------

    def _failed(self, req, err, why=''):
        if self.disconnect_expected.is_set() or self.dead:
            self.lost += 1
            if req.kind in ('write', 'zero', 'trim'):
                # Unacknowledged: it may or may not have happened.
                self.oracle.forget(req.offset, req.length)
            return
        if self.tolerate_errors:
            self.failed += 1
        else:
            self.errors.append('%s of %d bytes at %d failed: errno %s %s' % (
                req.kind, req.length, req.offset, err, why))
        if req.kind in ('write', 'zero', 'trim'):
            self.oracle.forget(req.offset, req.length)

    def _process_completions(self):
        done, self.completed = self.completed, []
        for req, err in done:
            self.inflight.pop(id(req), None)
            if err:
                self._failed(req, err)
                continue
            if req.kind == 'read':
                got = req.buf.to_bytearray()
                self.read_bytes += req.length
                m = self.oracle.check(req.offset, got)
                if m:
                    self.mismatches.append(m)
            elif req.kind == 'write':
                self.oracle.write(req.offset, req.payload)
                self.write_bytes += req.length
            elif req.kind == 'zero':
                self.oracle.zero(req.offset, req.length)
            elif req.kind == 'trim':
                self.oracle.forget(req.offset, req.length)

    def _handle_dead(self):
        try:
            return self.h.aio_is_dead() or self.h.aio_is_closed()
        except nbd.Error:
            return True

    def _mark_dead(self):
        if self.dead:
            return
        self.dead = True
        self.inflight_at_death = len(self.inflight)
        for req in list(self.inflight.values()):
            self._failed(req, -1, 'connection lost')
        self.inflight.clear()

    def _poll(self, timeout_ms):
        try:
            self.h.poll(timeout_ms)
        except nbd.Error as exc:
            if not self.disconnect_expected.is_set():
                self.errors.append('poll failed: %s' % exc)
            self._process_completions()
            self._mark_dead()
            return
        self._process_completions()
        if self._handle_dead():
            if not self.disconnect_expected.is_set():
                self.errors.append('the connection died')
            self._mark_dead()

    # -- driving -------------------------------------------------------

    def run(self, nops=None, duration=None, timeout=120, stop=None):
        """Issue ``nops`` requests (or for ``duration`` s), wait for all.

        Returns when everything issued has completed, the connection died,
        or ``stop`` (an Event) is set.  ``timeout`` bounds the whole run.
        """
        start = time.monotonic()
        hard = start + timeout
        until = start + duration if duration else None
        issued = 0
        while True:
            now = time.monotonic()
            more = (not self.dead and
                    (nops is None or issued < nops) and
                    (until is None or now < until) and
                    not (stop is not None and stop.is_set()))
            if more:
                while len(self.inflight) < self.depth:
                    if not self._issue_one():
                        break
                    issued += 1
                    if nops is not None and issued >= nops:
                        break
            if not self.inflight:
                if not more or self.dead:
                    break
                continue
            if now > hard:
                raise AssertionError(
                    'workload did not finish within %s s: %d requests '
                    'still in flight' % (timeout, len(self.inflight)))
            self._poll(1000)
        return self

    def flush(self):
        self.h.flush()

    def summary(self):
        ops = sum(v for k, v in self.counts.items() if k != 'fua')
        return ('%(ops)d ops (%(c)s), %(ua)d unaligned, %(rb)d B read, '
                '%(wb)d B written, max %(mi)d in flight, %(lost)d lost, '
                '%(failed)d failed (tolerated), %(err)d errors, '
                '%(mm)d mismatches' % dict(
                    failed=self.failed, ops=ops,
                    c=', '.join('%s %d' % kv for kv in
                                sorted(self.counts.items())),
                    ua=self.unaligned, rb=self.read_bytes,
                    wb=self.write_bytes, mi=self.max_inflight,
                    lost=self.lost, err=len(self.errors),
                    mm=len(self.mismatches)))

    def assert_clean(self):
        problems = []
        if self.errors:
            problems.append('%d request errors, first: %s' % (
                len(self.errors), '; '.join(self.errors[:5])))
        if self.mismatches:
            problems.append('%d oracle mismatches (stale or wrong data), '
                            'first: %s' % (len(self.mismatches), '; '.join(
                                repr(m) for m in self.mismatches[:5])))
        assert not problems, '%s\n%s' % (self.summary(), '\n'.join(problems))


def connect(uri, strict=True, name=None):
    h = nbd.NBD()
    if name:
        h.set_handle_name(name)
    if not strict:
        h.set_strict_mode(0)
    h.connect_uri(uri)
    return h


def close(h):
    """Disconnect cleanly (NBD_CMD_DISC); the handle is freed when dropped."""
    try:
        h.shutdown()
    except nbd.Error:
        pass


def aio_reads(h, pieces, depth=8, timeout=60, what='reads'):
    """Read each ``(offset, length)`` of ``pieces`` through ``h``.

    ``depth`` requests in flight at once (libnbd's aio_pread).  Yields
    ``(offset, data, errno)`` as each one completes: ``data`` is a
    bytearray, or None when the server answered ``errno``.  Raises
    AssertionError when they have not all completed within ``timeout`` s.
    """
    queue = iter(pieces)
    pending = {}
    done = []
    deadline = time.monotonic() + timeout

    def cb_for(off, buf):
        def cb(err):
            done.append((off, buf, err.value))
            return 1
        return cb

    nxt = next(queue, None)
    while nxt is not None or pending:
        while nxt is not None and len(pending) < depth:
            off, length = nxt
            buf = nbd.Buffer(length)
            pending[off] = buf
            h.aio_pread(buf, off, completion=cb_for(off, buf))
            nxt = next(queue, None)
        h.poll(1000)
        while done:
            off, buf, err = done.pop()
            del pending[off]
            yield off, (None if err else buf.to_bytearray()), err
        if time.monotonic() > deadline:
            raise AssertionError('%s did not finish in %s s' % (what, timeout))


def read_range(h, lo, hi, chunk=64 * 1024, depth=8, timeout=60):
    """Read [lo, hi) through ``h``; returns (data, [(offset, errno)])."""
    out = bytearray(hi - lo)
    errors = []
    pieces = ((off, min(chunk, hi - off)) for off in range(lo, hi, chunk))
    for off, data, err in aio_reads(h, pieces, depth, timeout,
                                    'read of [%d, %d)' % (lo, hi)):
        if err:
            errors.append((off, err))
        else:
            out[off - lo:off - lo + len(data)] = data
    return out, errors


def read_all(h, size, chunk=1 << 20, depth=8, timeout=60):
    """Read ``size`` bytes through ``h``, many requests in flight."""
    out, errors = read_range(h, 0, size, chunk, depth, timeout)
    assert not errors, ['read at %d: errno %d' % e for e in errors[:5]]
    return out


def compare(oracle, data, what, limit=5):
    """Compare a full image with the oracle; return a list of Mismatches."""
    out = []
    step = 1 << 20
    for off in range(0, oracle.size, step):
        m = oracle.check(off, data[off:off + step], what=what)
        if m:
            out.append(m)
            if len(out) >= limit:
                break
    return out


def verify_all(h, oracle, what='verify read'):
    data = read_all(h, oracle.size)
    return compare(oracle, data, what)


class StatsSampler(object):
    """Samples volume-show in a thread; keeps the maximum of each counter."""

    def __init__(self, agent, volume_id, interval=0.1):
        self.agent = agent
        self.volume_id = volume_id
        self.interval = interval
        self.max = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        client = self.agent.client(timeout=5)
        while not self._stop.wait(self.interval):
            try:
                s = client.show_volume(self.volume_id)
            except Exception:
                continue
            self.samples += 1
            for k, v in s.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.max[k] = max(self.max.get(k, v), v)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)
