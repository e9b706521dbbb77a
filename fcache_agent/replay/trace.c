/* SPDX-License-Identifier: Apache-2.0 */
/* Opening a trace and dispatching to its format's reader (trace_csv.c,
 * trace_oracle.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trace_priv.h"
#include "common/enum_names.h"

static const char *const format_names[] = {
  [FC_TRACE_CSV] = "csv",
  [FC_TRACE_ORACLE] = "oracle",
};

FC_DEFINE_ENUM_NAMES(fc_trace_format, enum fc_trace_format, format_names)

static bool
has_suffix(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);

  return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

int
fc_trace_format_guess(const char *path, enum fc_trace_format *out)
{
  if (has_suffix(path, ".csv")) {
    *out = FC_TRACE_CSV;
    return 0;
  }
  /* libCacheSim's own names: x.oracleGeneral, x.oracleGeneral.bin. */
  if (has_suffix(path, ".oracleGeneral") || has_suffix(path, ".bin")) {
    *out = FC_TRACE_ORACLE;
    return 0;
  }
  return -EINVAL;
}

int
fc_trace_fail(struct fc_trace *t, const char *fmt, ...)
{
  va_list ap;
  int r;

  va_start(ap, fmt);
  r = trace_vfail(t, fmt, ap);
  va_end(ap);
  return r;
}

int
trace_vfail(struct fc_trace *t, const char *fmt, va_list ap)
{
  int n;

  if (t->fmt == FC_TRACE_CSV)
    n = snprintf(t->err, sizeof t->err, "%s:%llu: ", t->path,
                 (unsigned long long)t->pos);
  else
    n = snprintf(t->err, sizeof t->err, "%s: record %llu: ", t->path,
                 (unsigned long long)t->pos);
  if (n < 0 || (size_t)n >= sizeof t->err)
    return -EINVAL;
  vsnprintf(t->err + n, sizeof t->err - (size_t)n, fmt, ap);
  return -EINVAL;
}

int
fc_trace_open(const char *path, enum fc_trace_format fmt, uint32_t block_size,
              unsigned oracle_volume_shift, struct fc_trace **out)
{
  struct fc_trace *t;
  int r;

  if (!path || block_size == 0 || oracle_volume_shift > 63 ||
      (fmt != FC_TRACE_CSV && fmt != FC_TRACE_ORACLE))
    return -EINVAL;
  t = calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  t->fmt = fmt;
  t->bs = block_size;
  t->shift = oracle_volume_shift;
  t->path = strdup(path);
  if (fmt == FC_TRACE_ORACLE)
    t->buf = malloc((size_t)ORACLE_BATCH * ORACLE_RECORD);
  if (!t->path || (fmt == FC_TRACE_ORACLE && !t->buf)) {
    r = -ENOMEM;
    goto out;
  }
  t->f = fopen(path, fmt == FC_TRACE_CSV ? "r" : "rb");
  if (!t->f) {
    r = -errno;
    goto out;
  }
  /* Big reads: the replay is bound by parsing, not by syscalls. */
  setvbuf(t->f, NULL, _IOFBF, 1 << 20);
  *out = t;
  return 0;
out:
  fc_trace_close(t);
  return r;
}

int
fc_trace_next(struct fc_trace *t, struct fc_trace_req *req)
{
  int r = t->fmt == FC_TRACE_CSV ? trace_csv_next(t, req) :
                                   trace_oracle_next(t, req);

  if (r == 1)
    t->count++;
  return r;
}

const char *
fc_trace_error(const struct fc_trace *t)
{
  return t->err;
}

uint64_t
fc_trace_count(const struct fc_trace *t)
{
  return t->count;
}

void
fc_trace_close(struct fc_trace *t)
{
  if (!t)
    return;
  if (t->f)
    fclose(t->f);
  free(t->line);
  free(t->buf);
  free(t->path);
  free(t);
}
