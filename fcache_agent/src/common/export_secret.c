/* SPDX-License-Identifier: Apache-2.0 */
/* Export secrets; see export_secret.h. */
#include "export_secret.h"

#include "random_hex.h"

int
fc_export_secret_new(char *out)
{
  return fc_random_hex(out, FC_EXPORT_SECRET_BYTES);
}

bool
fc_export_secret_valid(const char *s)
{
  return fc_hex_valid(s, FC_EXPORT_SECRET_LEN);
}
