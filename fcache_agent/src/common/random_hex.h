/* SPDX-License-Identifier: Apache-2.0 */
/* Fresh secrets as lowercase hex: export names (export_secret.h) and a
 * migration's settle secret (engine/volume.h). */
#ifndef FCACHE_RANDOM_HEX_H
#define FCACHE_RANDOM_HEX_H

#include <stdbool.h>
#include <stddef.h>

/* Fill out (2 * bytes + 1 chars) with `bytes` bytes from getrandom(2), in
 * lowercase hex.  0, or -errno. */
int fc_random_hex(char *out, size_t bytes);

/* True when s is exactly len lowercase hex digits. */
bool fc_hex_valid(const char *s, size_t len);

#endif
