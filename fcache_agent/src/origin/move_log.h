/* SPDX-License-Identifier: Apache-2.0 */
/* The recovery log of a move (lr, slr, aio): every write that may reach
 * B and not A, appended with its data before it is sent, so that A can be
 * made whole again without B (which may be what failed).  Private to
 * origin/. */
#ifndef FCACHE_MOVE_LOG_H
#define FCACHE_MOVE_LOG_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include "origin.h"

struct move_log {
  int fd;
  pthread_mutex_t lock;
  uint64_t records;
};

/* Create (truncate) the log at path for a move from a_uri to b_uri by
 * `scheme` (enum fc_move_scheme), durable (file and directory) before the
 * first write goes to B. */
int move_log_create(struct move_log *l, const char *path, const char *a_uri,
                    const char *b_uri, uint32_t scheme);
/* Append one write; durable only after move_log_sync. */
int move_log_append(struct move_log *l, const void *buf, uint32_t count, uint64_t off);
int move_log_sync(struct move_log *l);
void move_log_close(struct move_log *l);

/* What a log's header says of its move. */
struct move_log_info {
  uint32_t scheme;
  char b_uri[1024];
};

/* Write every complete record of the log at path to `a`, in order.
 * *matches: the log's source is a_uri (else nothing is replayed); info,
 * if not NULL, is filled then.  Returns records replayed, or -errno
 * (-ENOENT: no log; -EPROTONOSUPPORT: the log matches but its scheme is
 * not one that logs, lr, slr or aio, and nothing was replayed). */
int move_log_replay(const char *path, const char *a_uri, struct fc_origin *a,
                    int *matches, struct move_log_info *info);

#endif
