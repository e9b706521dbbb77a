/* The recovery log of a move (lr, slr): every write that reaches B and
 * not A, appended with its data before it is sent to B, so that A can be
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

/* Create (truncate) the log at path for a move away from a_uri, durable
 * (file and directory) before the first write goes to B. */
int move_log_create(struct move_log *l, const char *path, const char *a_uri);
/* Append one write; durable only after move_log_sync. */
int move_log_append(struct move_log *l, const void *buf, uint32_t count, uint64_t off);
int move_log_sync(struct move_log *l);
void move_log_close(struct move_log *l);

/* Write every complete record of the log at path to `a`, in order.
 * *matches: the log's source is a_uri (else nothing is replayed).
 * Returns records replayed, or -errno (-ENOENT: no log). */
int move_log_replay(const char *path, const char *a_uri, struct fc_origin *a,
                    int *matches);

#endif
