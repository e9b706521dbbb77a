/* SPDX-License-Identifier: Apache-2.0 */
/* The oracleGeneral reader: fixed 24-byte little-endian records, read a
 * batch at a time.  Decoded byte by byte: the records are packed (no
 * alignment) and the host may not be little-endian. */
#include <errno.h>
#include <string.h>

#include "trace_priv.h"

static uint64_t
le(const unsigned char *p, unsigned n)
{
  uint64_t v = 0;

  for (unsigned i = n; i-- > 0;)
    v = v << 8 | p[i];
  return v;
}

static int
refill(struct fc_trace *t)
{
  size_t left = t->buf_len - t->buf_off;

  memmove(t->buf, t->buf + t->buf_off, left);
  t->buf_len = left;
  t->buf_off = 0;
  t->buf_len += fread(t->buf + left, 1,
                      (size_t)ORACLE_BATCH * ORACLE_RECORD - left, t->f);
  if (ferror(t->f)) {
    t->pos++;
    trace_fail(t, "read error: %s", strerror(errno));
    return -EIO;
  }
  return 0;
}

int
trace_oracle_next(struct fc_trace *t, struct fc_trace_req *req)
{
  const unsigned char *p;
  uint64_t id;
  int r;

  if (t->buf_len - t->buf_off < ORACLE_RECORD) {
    r = refill(t);
    if (r)
      return r;
    if (t->buf_len == 0)
      return 0;
    if (t->buf_len < ORACLE_RECORD) {
      t->pos++;
      return trace_fail(t, "truncated: %zu of %u bytes (a 24-byte "
                        "oracleGeneral record)", t->buf_len, ORACLE_RECORD);
    }
  }
  p = t->buf + t->buf_off;
  t->buf_off += ORACLE_RECORD;
  t->pos++;
  id = le(p + 4, 8);
  req->time = (double)le(p, 4);
  req->is_write = false;
  req->nr_blocks = 1;
  if (t->shift) {
    snprintf(t->volume, sizeof t->volume, "%llu",
             (unsigned long long)(id >> t->shift));
    req->first_block = id & ((1ull << t->shift) - 1);
  } else {
    t->volume[0] = '0';
    t->volume[1] = '\0';
    req->first_block = id;
  }
  req->volume = t->volume;
  return 1;
}
