/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the trace readers (trace.h): the state both formats share, and
 * each format's reader. */
#ifndef FCACHE_REPLAY_TRACE_PRIV_H
#define FCACHE_REPLAY_TRACE_PRIV_H

#include <stdarg.h>
#include <stdio.h>

#include "trace.h"

#define ORACLE_RECORD 24u
#define ORACLE_BATCH 8192u   /* records read at once */

struct fc_trace {
  char *path;
  FILE *f;
  enum fc_trace_format fmt;
  uint32_t bs;
  unsigned shift;
  uint64_t count;        /* requests returned */
  uint64_t pos;          /* csv: line number; oracle: record number */
  char volume[FC_TRACE_VOLUME_MAX];
  char err[512];
  /* csv */
  bool header_seen;
  char *line;
  size_t line_cap;
  /* oracle */
  unsigned char *buf;
  size_t buf_len, buf_off;
};

/* Record "path:where: what" in t->err; returns -EINVAL. */
int trace_vfail(struct fc_trace *t, const char *fmt, va_list ap)
  __attribute__((format(printf, 2, 0)));
#define trace_fail fc_trace_fail

int trace_csv_next(struct fc_trace *t, struct fc_trace_req *req);
int trace_oracle_next(struct fc_trace *t, struct fc_trace_req *req);

#endif
