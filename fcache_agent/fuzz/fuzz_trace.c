/* SPDX-License-Identifier: Apache-2.0 */
/* fcache-replay's trace readers (replay/trace*.c) and the replay they
 * drive (replay/sim.c): the input is a trace file, which the tool opens
 * with fc_trace_open() and replays with fc_replay_run(), as
 * replay/fcache-replay.c does.  A trace comes from anyone who shares one,
 * so a line must not be able to make the replay run for hours or take the
 * machine's memory.
 *
 *   byte 0, bit 0:    the format: 0 csv, 1 oracleGeneral
 *           bits 1-2: the block size: 512, 4096, 65536, 1 MiB
 *           bits 3-5: the policy (lru, noalloc, wss, rws, hec; 5-7 rws)
 *           bit 6:    ten-second windows (else the default hour), so that
 *                     windows close, predictions run and shares move
 *                     within a short trace.  (Not one second: closing a
 *                     window costs every volume's predictor, and with
 *                     the million windows a request may jump ahead
 *                     (sim.c) times the volumes, a few lines ran for
 *                     seconds and the fuzzer mostly waited on them.)
 *           bit 7:    oracle: volume shift 8 (else one volume "0")
 *   bytes 1..:        the trace
 * The cache is 64 blocks, each volume's limit 16: what a block costs the
 * replay is the same at any size, and a small cache keeps the evictions
 * coming.  The result is then printed (to /dev/null) as the tool prints
 * it, table and JSON. */
#include "fuzz.h"
#include "replay/replay.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  devnull = fopen("/dev/null", "w");
  if (!devnull)
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const uint32_t sizes[4] = { 512, 4096, 65536, 1u << 20 };
  struct fc_replay_result *res = NULL;
  struct fc_replay_config c;
  enum fc_trace_format fmt;
  struct fc_trace *t;
  const char *path;
  char err[600];
  unsigned sel;
  int r;

  if (size < 1)
    return 0;
  sel = data[0];
  fmt = sel & 1 ? FC_TRACE_ORACLE : FC_TRACE_CSV;
  fc_replay_config_default(&c);
  c.block_size = sizes[(sel >> 1) & 3];
  c.policy = ((sel >> 3) & 7) <= FC_REPLAY_HEC ?
             (enum fc_replay_policy)((sel >> 3) & 7) : FC_REPLAY_RWS;
  if (sel & 0x40)
    c.window_s = 10;
  c.cache_blocks = 64;
  c.volume_limit_blocks = 16;
  if (fc_replay_config_check(&c, err, sizeof err))
    abort();
  path = fuzz_file(fmt == FC_TRACE_CSV ? "trace.csv" : "trace.oracleGeneral",
                   data + 1, size - 1);
  r = fc_trace_open(path, fmt, c.block_size,
                    fmt == FC_TRACE_ORACLE && (sel & 0x80) ? 8 : 0, &t);
  if (r)
    abort();
  err[0] = '\0';
  r = fc_replay_run(&c, t, &res, err, sizeof err);
  if (r == 0) {
    /* Every request the reader returned was replayed. */
    if (res->total.requests != fc_trace_count(t))
      abort();
    /* And the report the tool prints of it, table and JSON. */
    fc_replay_print_table(devnull, res);
    if (fc_replay_print_json(devnull, res))
      abort();
    fc_replay_result_free(res);
  } else if (!err[0] || (r != -EINVAL && r != -ENOMEM)) {
    /* A refused trace says why (the file and line). */
    abort();
  }
  fc_trace_close(t);
  return 0;
}
