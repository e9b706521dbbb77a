/* Inside the destination side of a migration: shared by migr_dest.c (the
 * receiver and worker threads) and migr_dest_remote.c (the VM threads'
 * fetches and reads from the source).  Not for other modules. */
#ifndef FCACHE_MIGR_DEST_PRIV_H
#define FCACHE_MIGR_DEST_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "migration.h"

#define CREDITS 256u           /* background blocks in flight per stream */
#define FETCH_TIMEOUT_S 10
/* A clean block is at the origin too: past this many fetches in flight,
 * or this long, the origin is the faster way. */
#define FETCH_CLEAN_MAX_INFLIGHT 16
#define FETCH_CLEAN_TIMEOUT_MS 500
#define PRELOAD_THREADS 4
/* A read before the switchover is one the hypervisor (or the guest, in
 * the moment between the hypervisor's switch and ours) waits on. */
#define READ_TIMEOUT_S 30

struct dest_queue {
  uint8_t *data;               /* CREDITS blocks */
  uint64_t *ids;               /* oblock | dirty bit */
  uint32_t head, n;
};

struct fetch_wait {
  struct fetch_wait *next;
  uint64_t ob;
  void *data;
  bool done, dirty;
  int r;
};

struct read_wait {
  struct read_wait *next;
  uint64_t tag;
  void *buf;
  uint32_t len;
  bool done;
  int r;
};

/* A DATA frame: the answer to one of our READs.  A reply for a read that
 * gave up waiting is dropped; one that does not fit its read ends the
 * stream (-EPROTO). */
int fc_migr_dest_deliver_data(struct fc_migration *m, uint16_t flags, const uint8_t *p,
                              uint32_t len);
/* A fetched block (or F_ABSENT) for the fetches waiting on it. */
void fc_migr_dest_deliver_reply(struct fc_migration *m, uint64_t id, uint16_t flags,
                                const uint8_t *data);

#endif
