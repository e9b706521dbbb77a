# SPDX-License-Identifier: Apache-2.0
"""Trace files: the replayer's CSV and libCacheSim's oracleGeneral.

CSV (``fcache-replay --format csv``): one request a line,
``time,volume,op,offset,length`` with time in seconds (float), the volume's
id, ``R`` or ``W``, and offset and length in bytes.  No header.

oracleGeneral (``--format oracle``, libCacheSim's binary trace): packed
little-endian 24-byte records ``uint32 clock_time, uint64 obj_id, uint32
obj_size, int64 next_access_vtime``, one per *block* access (a request of n
blocks becomes n records).  obj_id is the block number, with the volume's
index in bits 40 and up (so one volume's ids are its block numbers);
obj_size is the block size; clock_time is whole seconds.  The format has
no operation: reads and writes alike become accesses.  next_access_vtime
is the 1-based position in the file of the next record with the same
obj_id, -1 if there is none, as libCacheSim's own converter writes it
(its plain LRU does not read it; Belady-like policies do).
"""

import os

import numpy as np

from bench.traces import shapes

ORACLE_DTYPE = np.dtype([('clock_time', '<u4'), ('obj_id', '<u8'),
                         ('obj_size', '<u4'), ('next_access_vtime', '<i8')])
assert ORACLE_DTYPE.itemsize == 24

VOLUME_SHIFT = 40
OPS = ('R', 'W')


class CsvWriter(object):
    def __init__(self, f, volume_names, block_size):
        self.f = f
        self.names = list(volume_names)
        self.bs = block_size

    def write(self, chunk):
        names = self.names
        bs = self.bs
        lines = ['%.6f,%s,%s,%d,%d\n' % (t, names[v], OPS[o], b * bs, n * bs)
                 for t, v, o, b, n in zip(chunk['t'].tolist(),
                                          chunk['vol'].tolist(),
                                          chunk['op'].tolist(),
                                          chunk['block'].tolist(),
                                          chunk['nblk'].tolist())]
        self.f.write(''.join(lines))

    def close(self):
        pass


def expand_blocks(chunk, block_size):
    """A request chunk as oracleGeneral records, one per block."""
    nblk = chunk['nblk'].astype(np.int64)
    total = int(nblk.sum())
    idx = np.repeat(np.arange(len(chunk)), nblk)
    starts = np.cumsum(nblk) - nblk
    within = np.arange(total, dtype=np.int64) - np.repeat(starts, nblk)
    rec = np.empty(total, dtype=ORACLE_DTYPE)
    rec['clock_time'] = np.floor(chunk['t'][idx]).astype(np.uint32)
    vol = chunk['vol'][idx].astype(np.uint64) << np.uint64(VOLUME_SHIFT)
    rec['obj_id'] = vol | (chunk['block'][idx] + within).astype(np.uint64)
    rec['obj_size'] = block_size
    rec['next_access_vtime'] = -1
    return rec


class OracleWriter(object):
    """Writes oracleGeneral records.

    Records are written with next_access_vtime -1, filled in on close by
    one pass over the file from its end (see :func:`fill_next_access`).
    """

    def __init__(self, f, block_size):
        self.f = f
        self.bs = block_size

    def write(self, chunk):
        self.f.write(expand_blocks(chunk, self.bs).tobytes())

    def close(self):
        self.f.flush()
        fill_next_access(self.f)


def fill_next_access(f, chunk_records=1 << 20):
    """Set every record's next_access_vtime in the open oracleGeneral file.

    Walks the file backwards a chunk at a time; within a chunk a stable
    sort by obj_id pairs each access with its successor, and a dict of
    each id's earliest position after the chunk links chunks.
    """
    f.seek(0, os.SEEK_END)
    n = f.tell() // ORACLE_DTYPE.itemsize
    first_after = {}
    end = n
    while end > 0:
        start = max(0, end - chunk_records)
        f.seek(start * ORACLE_DTYPE.itemsize)
        rec = np.frombuffer(f.read((end - start) * ORACLE_DTYPE.itemsize),
                            dtype=ORACLE_DTYPE).copy()
        ids = rec['obj_id']
        vt = np.arange(start + 1, end + 1, dtype=np.int64)
        order = np.argsort(ids, kind='stable')
        sid = ids[order]
        same = sid[1:] == sid[:-1]
        nxt = np.full(len(rec), -1, dtype=np.int64)
        nxt[order[:-1][same]] = vt[order[1:][same]]
        last = np.ones(len(rec), dtype=bool)
        last[:-1] = ~same           # last of its id in this chunk
        first = np.ones(len(rec), dtype=bool)
        first[1:] = ~same           # first of its id in this chunk
        last_pos = order[last]
        get = first_after.get
        nxt[last_pos] = [get(x, -1) for x in sid[last].tolist()]
        first_after.update(zip(sid[first].tolist(),
                               vt[order[first]].tolist()))
        rec['next_access_vtime'] = nxt
        f.seek(start * ORACLE_DTYPE.itemsize)
        f.write(rec.tobytes())
        end = start
    f.flush()


def write_trace(path, fmt, profiles, seed, block_size=4096):
    """Generate the trace of ``profiles`` into ``path``; returns counts."""
    names = [p.name for p in profiles]
    counts = {'requests': 0, 'block_accesses': 0}
    mode = 'w' if fmt == 'csv' else 'w+b'
    with open(path, mode) as f:
        if fmt == 'csv':
            w = CsvWriter(f, names, block_size)
        elif fmt == 'oracle':
            w = OracleWriter(f, block_size)
        else:
            raise ValueError('unknown format %r' % fmt)
        for chunk in shapes.stream(profiles, seed):
            w.write(chunk)
            counts['requests'] += len(chunk)
            counts['block_accesses'] += int(chunk['nblk'].sum())
        w.close()
    return counts


def read_csv(path, chunk=shapes.CHUNK, block_size=4096):
    """Yield (chunk of REQ_DTYPE, volume names seen so far) from a CSV."""
    names = {}
    rows = []

    def flush():
        out = np.empty(len(rows), dtype=shapes.REQ_DTYPE)
        if rows:
            t, v, o, off, ln = zip(*rows)
            out['t'] = t
            out['vol'] = v
            out['op'] = o
            out['block'] = np.asarray(off, dtype=np.int64) // block_size
            out['nblk'] = -(-np.asarray(ln, dtype=np.int64) // block_size)
        return out

    with open(path) as f:
        for line in f:
            t, vol, op, off, ln = line.rstrip('\n').split(',')
            v = names.setdefault(vol, len(names))
            rows.append((float(t), v, OPS.index(op), int(off), int(ln)))
            if len(rows) == chunk:
                yield flush(), list(names)
                rows = []
    if rows:
        yield flush(), list(names)


def read_oracle(path, chunk_records=1 << 20):
    """Yield chunks of ORACLE_DTYPE records from an oracleGeneral file."""
    with open(path, 'rb') as f:
        while True:
            buf = f.read(chunk_records * ORACLE_DTYPE.itemsize)
            if not buf:
                return
            yield np.frombuffer(buf, dtype=ORACLE_DTYPE)
