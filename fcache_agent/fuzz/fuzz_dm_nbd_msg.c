/* SPDX-License-Identifier: Apache-2.0 */
/* dmcache: what the kernel's netlink socket answers the NBD relay
 * (dm_nbd_msg_parse), and the requests built for it.
 *
 * Input: one byte of mode, then
 *   mode even: a datagram as recv() would return it, parsed for seq 1 --
 *     the answer gathered must be one the caller can trust (an error is
 *     a -errno, an index is not negative);
 *   mode odd: 8 bytes of little-endian values for the CONNECT request
 *     (index, timeouts, size, flags, fd: each taken from the bytes that
 *     follow, cycling) and a buffer size: the request is built into a
 *     buffer of exactly that size (ASan sees a byte written past it), and
 *     what was built parses back to its own index.
 */
#include "fuzz.h"
#include "dmcache/dm_nbd_msg.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  return 0;
}

static uint64_t take(const uint8_t *data, size_t size, size_t *pos)
{
  uint64_t v = 0;

  for (int i = 0; i < 8; i++)
    v |= (uint64_t)(size ? data[(*pos)++ % size] : 0) << (8 * i);
  return v;
}

static void parse(const uint8_t *data, size_t size)
{
  struct dm_nbd_answer ans;
  /* A copy of exactly the datagram's length: a read past it is seen. */
  uint8_t *buf = malloc(size ? size : 1);

  memcpy(buf, data, size);
  dm_nbd_answer_init(&ans);
  if (dm_nbd_msg_parse(buf, size, 1, &ans) == 0) {
    if (ans.error > 0 || ans.error < -4095 || ans.index < -1 ||
        ans.family < -1 || ans.family > 0xffff || (ans.error && !ans.done))
      abort();
  }
  free(buf);
}

static void build(const uint8_t *data, size_t size)
{
  size_t pos = 0;
  struct dm_nbd_conf conf;
  struct dm_nbd_answer ans;
  size_t cap = (size_t)(take(data, size, &pos) % (DM_NBD_MSG_MAX + 1));
  uint8_t *buf = malloc(cap ? cap : 1);
  int len;

  conf.index = (int)(int32_t)take(data, size, &pos);
  conf.size = take(data, size, &pos);
  conf.block_size = take(data, size, &pos);
  conf.timeout_s = take(data, size, &pos);
  conf.dead_conn_timeout_s = take(data, size, &pos);
  conf.server_flags = take(data, size, &pos);
  conf.fd = (int)(int32_t)take(data, size, &pos);
  len = dm_nbd_msg_connect(buf, cap, 0x20, 1, &conf);
  if (len > (int)cap || (len < 0 && len != -ENOSPC && len != -EINVAL))
    abort();
  if (len > 0) {
    dm_nbd_answer_init(&ans);
    if (dm_nbd_msg_parse(buf, (size_t)len, 1, &ans) < 0 ||
        ans.index != (conf.index < 0 ? -1 : conf.index))
      abort();
  }
  len = dm_nbd_msg_reconfigure(buf, cap, 0x20, 2, (uint32_t)conf.index,
                               conf.fd);
  if (len > (int)cap || (len < 0 && len != -ENOSPC && len != -EINVAL))
    abort();
  len = dm_nbd_msg_disconnect(buf, cap, 0x20, 3, (uint32_t)conf.index);
  if (len > (int)cap || (len < 0 && len != -ENOSPC))
    abort();
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return 0;
  if (data[0] & 1)
    build(data + 1, size - 1);
  else
    parse(data + 1, size - 1);
  return 0;
}
