/* SPDX-License-Identifier: Apache-2.0 */
/* Export secrets; see export_secret.h. */
#include "export_secret.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

int
fc_export_secret_new(char *out)
{
  static const char hex[] = "0123456789abcdef";
  uint8_t raw[FC_EXPORT_SECRET_BYTES];
  size_t got = 0;

  /* getrandom blocks only until the pool is first seeded, which a host
   * that runs VMs is long past; a short read is retried, not padded. */
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof raw; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[FC_EXPORT_SECRET_LEN] = '\0';
  memset(raw, 0, sizeof raw);
  return 0;
}

bool
fc_export_secret_valid(const char *s)
{
  size_t i;

  for (i = 0; s[i]; i++)
    if (i >= FC_EXPORT_SECRET_LEN ||
        !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return i == FC_EXPORT_SECRET_LEN;
}
