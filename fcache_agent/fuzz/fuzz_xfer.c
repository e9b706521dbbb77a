/* SPDX-License-Identifier: Apache-2.0 */
/* The migration stream, as a destination agent receives it from a source
 * that has been authenticated: frames (migration/xfer_frame.c: magic,
 * version, type, length bound, CRC-32C) and what the destination does
 * with each (migration/migr_dest*.c: LIST, the hot list and block lists,
 * SWITCH, background and fetched BLOCKs, DATA, DONE, ERROR), down to the
 * ucache engine that records and installs the blocks.
 *
 * Each input registers an incoming migration on a real agent
 * (fc_migration_incoming, as the migration-incoming control operation
 * does) and hands it a stream with fc_migr_dest_accept(), as the listener
 * does once HELLO and the token are checked; the receiver then reads the
 * stream to its end.  Input:
 *   byte 0:  the strategy (value & 0x7f, % 6: none, cachemior, firepan,
 *            firepan_if, cloudcache, hybrid); bit 7: the source's HELLO
 *            asked for SWITCHED (sent after a SWITCH)
 *   then records: u8 type, u16 flags (LE), u16 length (LE), payload.
 *   The harness seals each record into a frame with a correct CRC, since
 *   random bytes would almost never pass it; a type with bit 7 set sends
 *   the record's payload as raw bytes instead, to reach the frame checks.
 */
#include <pthread.h>

#include "fuzz_agent.h"
#include "fuzz_frames.h"

static struct fc_agent *agent;

static const char *const strategies[] = {
  "none", "cachemior", "firepan", "firepan_if", "cloudcache", "hybrid",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  agent = fuzz_agent_open();
  return 0;
}

/* The stream the input describes (caller frees). */
static uint8_t *encode(const uint8_t *data, size_t size, size_t *out_len)
{
  uint8_t *out = malloc(size * 4 + 64), *p = out;

  if (!out)
    abort();
  p = fuzz_frames(p, data, size);
  *out_len = (size_t)(p - out);
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct fc_xfer_conn c;
  struct fc_migration *m;
  json_t *args, *result = NULL;
  char err[512];
  uint8_t *stream;
  size_t len;
  int peer;

  if (size < 1)
    return 0;
  args = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I}",
                   "migration_id", "m-1", "volume_id", "vol-1",
                   "token", "0123456789abcdef0123456789abcdef"
                            "0123456789abcdef0123456789abcdef",
                   "strategy", strategies[(data[0] & 0x7f) % 6], "origin", fuzz_origin,
                   "write_policy", "write_back",
                   "cache_size", (json_int_t)(FUZZ_CACHE_BLOCKS / 2 * FUZZ_CACHE_BLOCK));
  if (fc_migration_incoming(agent, args, &result, err, sizeof err)) {
    fprintf(stderr, "fuzz: migration-incoming: %s\n", err);
    abort();
  }
  json_decref(args);
  json_decref(result);
  m = fc_migration_find(agent, "m-1");
  m->dst.peer_switch_ack = data[0] & 0x80;

  stream = encode(data + 1, size - 1, &len);
  fc_xfer_conn_init(&c, fuzz_socket(stream, len, &peer));
  free(stream);
  fc_migr_dest_accept(m, &c);
  /* The receiver reads the stream to its end (or to the first frame that
   * ends it) and then marks the migration disconnected. */
  pthread_mutex_lock(&m->lock);
  while (m->connected)
    pthread_cond_wait(&m->cond, &m->lock);
  pthread_mutex_unlock(&m->lock);
  close(peer);
  fc_migration_put(m);              /* fc_migration_find's reference */
  agent = fuzz_agent_reset(agent);
  return 0;
}
