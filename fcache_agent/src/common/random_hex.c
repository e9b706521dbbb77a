/* SPDX-License-Identifier: Apache-2.0 */
/* Random hex secrets; see random_hex.h. */
#include "random_hex.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

int
fc_random_hex(char *out, size_t bytes)
{
  static const char hex[] = "0123456789abcdef";
  uint8_t raw[64];
  size_t got = 0;

  if (bytes > sizeof raw)
    return -EINVAL;
  /* getrandom blocks only until the pool is first seeded, which a host
   * that runs VMs is long past; a short read is retried, not padded. */
  while (got < bytes) {
    ssize_t n = getrandom(raw + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    got += (size_t)n;
  }
  for (size_t i = 0; i < bytes; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[2 * bytes] = '\0';
  explicit_bzero(raw, sizeof raw);
  return 0;
}

bool
fc_hex_valid(const char *s, size_t len)
{
  size_t i;

  for (i = 0; s[i]; i++)
    if (i >= len ||
        !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return i == len;
}
