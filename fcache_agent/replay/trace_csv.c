/* SPDX-License-Identifier: Apache-2.0 */
/* The csv reader: `time,volume,op,offset,length` a line.  Hand-parsed
 * rather than with sscanf: the replay is bound by parsing, and a bad
 * number must be refused, not read as 0 or a prefix. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trace_priv.h"

#define NR_FIELDS 5

static char *
trim(char *s)
{
  char *e;

  while (*s == ' ' || *s == '\t')
    s++;
  e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
    e--;
  *e = '\0';
  return s;
}

static bool
parse_u64(const char *s, uint64_t *out)
{
  uint64_t v = 0;

  if (!*s)
    return false;
  for (; *s; s++) {
    unsigned d = (unsigned)(*s - '0');

    if (d > 9 || v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static bool
parse_time(const char *s, double *out)
{
  char *end;
  double v;

  if (!*s)
    return false;
  errno = 0;
  v = strtod(s, &end);
  if (*end || errno || !isfinite(v) || v < 0)
    return false;
  *out = v;
  return true;
}

static bool
parse_op(const char *s, bool *is_write)
{
  if (strcasecmp(s, "r") == 0 || strcasecmp(s, "read") == 0) {
    *is_write = false;
    return true;
  }
  if (strcasecmp(s, "w") == 0 || strcasecmp(s, "write") == 0) {
    *is_write = true;
    return true;
  }
  return false;
}

/* A volume id is printed as it is, in the table and as a JSON key (which
 * must be UTF-8): text, valid UTF-8 without control characters, or the
 * replay would end in a report that cannot be written (jansson refuses
 * the key) or in escape sequences sent to the terminal. */
static bool
volume_id_ok(const char *s)
{
  const unsigned char *p = (const unsigned char *)s;

  while (*p) {
    unsigned c = *p, n, min;
    uint32_t cp;

    if (c < 0x20 || c == 0x7f)
      return false;
    if (c < 0x80) {
      p++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1, min = 0x80, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2, min = 0x800, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return false;
    }
    for (unsigned i = 1; i <= n; i++) {
      if ((p[i] & 0xc0) != 0x80)
        return false;       /* also stops at the NUL */
      cp = cp << 6 | (p[i] & 0x3f);
    }
    /* Overlong forms, UTF-16 surrogates and code points past U+10FFFF
     * are not UTF-8; C1 controls are controls. */
    if (cp < min || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff ||
        (cp >= 0x80 && cp <= 0x9f))
      return false;
    p += n + 1;
  }
  return true;
}

/* Split line at commas into f[]; the number of fields found. */
static unsigned
split(char *line, char **f)
{
  unsigned n = 0;
  char *p = line;

  for (;;) {
    char *c = strchr(p, ',');

    if (n < NR_FIELDS)
      f[n] = p;
    n++;
    if (!c)
      break;
    *c = '\0';
    p = c + 1;
  }
  for (unsigned i = 0; i < n && i < NR_FIELDS; i++)
    f[i] = trim(f[i]);
  return n;
}

int
trace_csv_next(struct fc_trace *t, struct fc_trace_req *req)
{
  for (;;) {
    ssize_t len = getline(&t->line, &t->line_cap, t->f);
    char *f[NR_FIELDS], *line;
    uint64_t off, n;
    unsigned nf;

    if (len < 0) {
      if (ferror(t->f)) {
        t->pos++;
        trace_fail(t, "read error: %s", strerror(errno));
        return -EIO;
      }
      return 0;
    }
    t->pos++;
    if (len > 0 && t->line[len - 1] == '\n')
      t->line[--len] = '\0';
    if ((size_t)len != strlen(t->line))
      return trace_fail(t, "NUL byte in line");
    line = trim(t->line);
    if (!*line)
      continue;
    nf = split(line, f);
    if (nf != NR_FIELDS)
      return trace_fail(t, "expected 5 fields time,volume,op,offset,length, "
                        "got %u", nf);
    if (!parse_time(f[0], &req->time)) {
      /* Only the first line may be a header, and only a wordy one. */
      if (t->count == 0 && !t->header_seen &&
          isalpha((unsigned char)f[0][0])) {
        t->header_seen = true;
        continue;
      }
      return trace_fail(t, "bad time '%.40s' (seconds, a number >= 0)", f[0]);
    }
    if (!*f[1])
      return trace_fail(t, "empty volume id");
    if (strlen(f[1]) >= FC_TRACE_VOLUME_MAX)
      return trace_fail(t, "volume id longer than %d bytes",
                        FC_TRACE_VOLUME_MAX - 1);
    if (!volume_id_ok(f[1]))
      return trace_fail(t, "volume id is not text (UTF-8, no control "
                        "characters)");
    if (!parse_op(f[2], &req->is_write))
      return trace_fail(t, "unknown op '%.40s' (R, W, read or write)", f[2]);
    if (!parse_u64(f[3], &off))
      return trace_fail(t, "bad offset '%.40s' (bytes, an unsigned integer)", f[3]);
    if (!parse_u64(f[4], &n))
      return trace_fail(t, "bad length '%.40s' (bytes, an unsigned integer)", f[4]);
    if (n > FC_TRACE_REQUEST_MAX)
      return trace_fail(t, "length %llu bytes is more than a request can be "
                        "(%llu bytes)", (unsigned long long)n,
                        (unsigned long long)FC_TRACE_REQUEST_MAX);
    if (n > UINT64_MAX - off)
      return trace_fail(t, "offset + length overflows");
    memcpy(t->volume, f[1], strlen(f[1]) + 1);
    req->volume = t->volume;
    req->first_block = off / t->bs;
    req->nr_blocks = n ? (off + n - 1) / t->bs - off / t->bs + 1 : 0;
    return 1;
  }
}
