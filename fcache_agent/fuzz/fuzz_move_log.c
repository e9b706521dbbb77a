/* SPDX-License-Identifier: Apache-2.0 */
/* A storage move's recovery log (origin/move_log.c): the input is the
 * <state_dir>/volumes/<id>.movelog that a restarted agent finds after a
 * crash mid-move (lr, slr, aio) and replays onto the volume's origin A
 * with fc_origin_move_recover(), as the engines' recovery does.  A is a
 * 64 KiB file opened with fc_origin_open_path(); the harness's A is
 * "/fuzz/a" (the log's header must name it for its records to be
 * replayed; the seeds do).
 *
 * Each record carries a CRC-32C that random bytes almost never match:
 *   byte 0, bit 0: the harness computes every record's CRC (walking the
 *                  records as the replay does: a 24-byte header
 *                  {magic, len, off, crc, pad} and len bytes of data)
 *   bytes 1..:     the log: a 2,072-byte header {magic, version, scheme,
 *                  uri_len, b_len, uri[1024], b_uri[1024]}, then records
 * What a replay wrote is checked against the records: each one's data is
 * in A at its offset (later records win), A's size is unchanged, and the
 * number replayed is what the call returned.  A log of A whose scheme is
 * not lr, slr or aio (2..4) is refused: nothing replayed, the log kept. */
#include "fuzz.h"
#include "common/crc32c.h"
#include "origin/origin.h"
#include "origin/origin_move.h"

#define A_URI "/fuzz/a"
#define A_SIZE (64u << 10)
#define HDR 2072u
#define REC 24u
#define REC_MAGIC 0x4d52u

static char a_path[512], log_path[512];
static uint8_t zero[A_SIZE], want[A_SIZE], got[A_SIZE];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  /* Not under /dev: the origin policy admits only block devices there. */
  snprintf(a_path, sizeof a_path, "%s/a.img", fuzz_setup_tmp());
  return 0;
}

static uint32_t get32(const uint8_t *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
  return get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Walk the records as move_log_replay() does (this harness's A and the
 * host's byte order), sealing them if asked, and apply the valid ones to
 * want[]: how many there are. */
static int expect(uint8_t *log, size_t size, bool seal)
{
  size_t at = HDR;
  int n = 0;

  while (size - at >= REC && size >= HDR) {
    uint8_t *h = log + at;
    uint32_t len = get32(h + 4), crc;
    uint64_t off = get64(h + 8);

    if (get32(h) != REC_MAGIC || len == 0 || off > A_SIZE || len > A_SIZE - off ||
        len > size - at - REC)
      break;
    crc = crc32c(crc32c(crc32c(0, h + 4, 4), h + 8, 8), h + REC, len);
    if (seal)
      memcpy(h + 16, &crc, 4);
    else if (get32(h + 16) != crc)
      break;
    memcpy(want + off, h + REC, len);
    n++;
    at += REC + len;
  }
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const char prefixes[1][FC_PATH_MAX] = { "/" };
  struct fc_origin_policy pol = { .prefixes = prefixes, .n_prefixes = 1,
                                  .state_dir = "/nonexistent",
                                  .cache_path = "/nonexistent" };
  struct fc_move_recovered rec;
  struct fc_origin *a;
  struct stat st;
  uint8_t *log;
  char err[1024];
  bool matches, known;
  int r, n, fd;

  if (size < 1)
    return 0;
  log = malloc(size);
  if (!log)
    abort();
  memcpy(log, data + 1, size - 1);
  memset(want, 0, sizeof want);
  n = expect(log, size - 1, data[0] & 1);
  snprintf(log_path, sizeof log_path, "%s", fuzz_file("vol.movelog", log, size - 1));
  matches = size - 1 >= HDR && get32(log + 16) < 1024 &&
            get32(log + 16) == strlen(A_URI) && !memcmp(log + 24, A_URI, strlen(A_URI)) &&
            get64(log) == 0x46434d4f56454c47ull && get32(log + 8) == 1 &&
            get32(log + 20) < 1024 && !memchr(log + 1048, 0, get32(log + 20));
  known = matches && get32(log + 12) >= 2 && get32(log + 12) <= 4;
  free(log);

  fd = open(a_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || pwrite(fd, zero, A_SIZE, 0) != A_SIZE)
    abort();
  close(fd);
  if (fc_origin_open_path(a_path, &pol, &a, err, sizeof err)) {
    fprintf(stderr, "fuzz: %s\n", err);
    abort();
  }
  r = fc_origin_move_recover(log_path, A_URI, a, &rec, err, sizeof err);
  fc_origin_close(a);
  if (matches && !known) {
    if (r != -EPROTONOSUPPORT || rec.found || access(log_path, F_OK) != 0)
      abort();
    unlink(log_path);
  } else {
    if (r < 0 || rec.found != matches || (matches && r != n) || (!matches && r != 0))
      abort();
    /* Replayed or not, the log is gone: its move is settled. */
    if (access(log_path, F_OK) == 0)
      abort();
  }
  fd = open(a_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) || st.st_size != A_SIZE ||
      pread(fd, got, A_SIZE, 0) != A_SIZE)
    abort();
  close(fd);
  if (memcmp(got, known ? want : zero, A_SIZE))
    abort();
  return 0;
}
