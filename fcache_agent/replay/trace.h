/* SPDX-License-Identifier: Apache-2.0 */
/* Block trace readers for the replayer: one request at a time from a file
 * that is streamed, never loaded whole (traces run to billions of
 * requests).  Two formats:
 *  - csv: `time,volume,op,offset,length` a line: time in seconds (a
 *    float), the volume's id (a string), op R/W/read/write (any case),
 *    offset and length in bytes; an optional header line; empty lines
 *    are skipped.  A request covers the blocks its byte range touches;
 *    its length is at most FC_TRACE_REQUEST_MAX.
 *  - oracle: libCacheSim's oracleGeneral, packed little-endian 24-byte
 *    records (uint32 clock_time, uint64 obj_id, uint32 obj_size, int64
 *    next_access_vtime).  One record is one read of block obj_id (the
 *    size and the oracle field are not used) of volume "0", or, with a
 *    volume shift s, of volume obj_id >> s, block obj_id & (2^s - 1).
 * Errors name the file and the line (csv) or record (oracle). */
#ifndef FCACHE_REPLAY_TRACE_H
#define FCACHE_REPLAY_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#define FC_TRACE_VOLUME_MAX 64   /* bytes of a volume id, with its NUL */
/* The longest request a csv line may hold: the replay visits each of its
 * blocks, so a length near 2^64 would run for years (2^52 blocks of 4
 * KiB).  The agent's NBD server takes no request over 64 MiB
 * (NBD_MAX_BLOCK_LIMIT), and the kernel splits any block I/O far below
 * that, so a longer one is not a request a block trace can hold. */
#define FC_TRACE_REQUEST_MAX (64ull << 20)

enum fc_trace_format {
  FC_TRACE_CSV,
  FC_TRACE_ORACLE,
};

struct fc_trace_req {
  double time;          /* seconds */
  const char *volume;   /* valid until the next fc_trace_next */
  bool is_write;
  uint64_t first_block;
  uint64_t nr_blocks;   /* 0 for a zero-length request */
};

struct fc_trace;

/* "csv", "oracle"; -EINVAL otherwise. */
int fc_trace_format_parse(const char *name, enum fc_trace_format *out);
const char *fc_trace_format_name(enum fc_trace_format f);
/* From the extension: .csv; .oracleGeneral or .bin (also before a
 * compression-free suffix such as .oracleGeneral.bin).  -EINVAL if none. */
int fc_trace_format_guess(const char *path, enum fc_trace_format *out);

/* oracle_volume_shift: 0 for one volume "0", else 1..63 (see above).
 * -errno from open(2), -EINVAL on bad arguments, -ENOMEM. */
int fc_trace_open(const char *path, enum fc_trace_format fmt, uint32_t block_size,
                  unsigned oracle_volume_shift, struct fc_trace **out);
/* 1: one request in *req; 0: the end; -EINVAL: malformed input, -EIO: a
 * read error (fc_trace_error says which, with the file and line). */
int fc_trace_next(struct fc_trace *t, struct fc_trace_req *req);
/* The last error as one line "FILE:LINE: what" (no newline). */
const char *fc_trace_error(const struct fc_trace *t);
/* Record an error found by the caller at the last request returned (a
 * time that jumps too far); returns -EINVAL. */
int fc_trace_fail(struct fc_trace *t, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));
/* Requests returned so far. */
uint64_t fc_trace_count(const struct fc_trace *t);
void fc_trace_close(struct fc_trace *t);

#endif
