/* SPDX-License-Identifier: Apache-2.0 */
/* NBD: what a client sends, from the first byte of the handshake to the
 * last request.
 *
 * The input is the client's whole side of one connection.  It is served by
 * nbd_conn_main(), the thread function the server runs for each accepted
 * socket, so the fixed-newstyle negotiation (nbd_handshake.c), the request
 * reading, draining and validation (nbd_conn.c, nbd_request.c) and the
 * replies are the agent's own.  One worker per connection keeps a run
 * deterministic.  The export behind it is a 1 MiB buffer, writable, with
 * every callback (block status reports its zero sectors as holes), so
 * every command reaches dispatch, structured replies and metadata
 * contexts included.  The first input byte's bit 0 picks a read-only
 * export instead, so the EPERM paths are reached too; its bit 1 makes the
 * connection one the kernel's NBD client holds (nbd_server_serve_socket):
 * no handshake, the input is requests from its first byte.
 */
#include <pthread.h>
#include <stdbool.h>

#include "fuzz.h"
#include "nbd/nbd_conn.h"
#include "nbd/nbd_request.h"

#define EXPORT_SIZE (1u << 20)

static uint8_t disk[EXPORT_SIZE];

/* The NBD layer promises the callbacks an in-range request (io_ops.h):
 * abort() if it ever breaks that, so the fuzzer reports it. */
static void check_range(uint32_t count, uint64_t offset)
{
  if (offset > EXPORT_SIZE || count > EXPORT_SIZE - offset)
    abort();
}

static int mem_pread(void *h, void *buf, uint32_t count, uint64_t offset)
{
  check_range(count, offset);
  memcpy(buf, disk + offset, count);
  return 0;
}

static int mem_pwrite(void *h, const void *buf, uint32_t count,
                      uint64_t offset, bool fua)
{
  check_range(count, offset);
  memcpy(disk + offset, buf, count);
  return 0;
}

static int mem_flush(void *h)
{
  return 0;
}

static int mem_trim(void *h, uint32_t count, uint64_t offset, bool fua)
{
  check_range(count, offset);
  memset(disk + offset, 0, count);
  return 0;
}

static int mem_zero(void *h, uint32_t count, uint64_t offset, bool fua,
                    bool may_trim)
{
  check_range(count, offset);
  memset(disk + offset, 0, count);
  /* An error on some requests, so the error reply is fuzzed as well. */
  return offset == 4096 ? -EIO : 0;
}

static bool sector_is_zero(uint64_t off)
{
  static const uint8_t zero[512];

  return memcmp(disk + off, zero, sizeof zero) == 0;
}

/* Per 512-byte sector, merged.  Two offsets answer wrongly on purpose
 * (no extent at all, one longer than asked), so the server's check of
 * the callback's answer is fuzzed too. */
static int mem_block_status(void *h, uint32_t count, uint64_t offset,
                            struct fc_extent *ext, uint32_t max)
{
  uint32_t n = 0;

  check_range(count, offset);
  if (max < 1)
    abort();
  if (offset == 8192)
    return 0;
  if (offset == 12288) {
    ext[0] = (struct fc_extent){ count + 512, 0 };
    return 1;
  }
  for (uint64_t pos = offset; pos < offset + count; pos += 512) {
    uint32_t f = sector_is_zero(pos) ? FC_EXTENT_HOLE | FC_EXTENT_ZERO : 0;

    if (n > 0 && ext[n - 1].flags == f) {
      ext[n - 1].length += 512;
      continue;
    }
    if (n == max)
      break;
    ext[n++] = (struct fc_extent){ 512, f };
  }
  return (int)n;
}

static int mem_cache(void *h, uint32_t count, uint64_t offset)
{
  check_range(count, offset);
  return offset == 4096 ? -EIO : 0;
}

static const struct fc_io_ops mem_ops = {
  .pread = mem_pread, .pwrite = mem_pwrite, .flush = mem_flush,
  .trim = mem_trim, .zero = mem_zero, .block_status = mem_block_status,
  .cache = mem_cache,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct nbd_server srv = { 0 };
  struct conn *c = calloc(1, sizeof *c);
  int peer;

  if (!c || size < 1)
    goto out;
  srv.exp = (struct fc_export){
    .name = "vol-1", .description = "fuzzed export", .size = EXPORT_SIZE,
    .min_block = 512, .pref_block = 4096, .max_block = 64 * 1024,
    .read_only = data[0] & 1, .ops = &mem_ops,
  };
  srv.nthreads = 1;
  srv.nconns = 1;
  pthread_mutex_init(&srv.lock, NULL);
  c->srv = &srv;
  c->preconnected = data[0] & 2;
  c->fd = fuzz_socket(data + 1, size - 1, &peer);
  pthread_mutex_init(&c->read_lock, NULL);
  pthread_mutex_init(&c->write_lock, NULL);
  nbd_conn_main(c);             /* closes c->fd */
  close(peer);
  pthread_mutex_destroy(&c->read_lock);
  pthread_mutex_destroy(&c->write_lock);
  pthread_mutex_destroy(&srv.lock);
out:
  free(c);
  return 0;
}
