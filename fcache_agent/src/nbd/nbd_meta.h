/* SPDX-License-Identifier: Apache-2.0 */
/* NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT payloads: pure
 * parsing, so the rules are unit tested.  The only context served is
 * "base:allocation" (extents that are holes or read as zeroes).
 *
 * Payload: u32 export name length, name, u32 number of queries, then each
 * query as u32 length and string.  Every length must add up exactly.
 * LIST matches "base:allocation" for no query at all (list everything),
 * the query "base:" (the whole namespace) or "base:allocation"; SET only
 * for "base:allocation" itself.  Other namespaces match nothing, which is
 * not an error.
 */
#ifndef FCACHE_NBD_META_H
#define FCACHE_NBD_META_H

#include <stdbool.h>
#include <stdint.h>

#define NBD_META_BASE_ALLOCATION "base:allocation"
/* The id SET gives base:allocation, repeated in every block-status reply.
 * Any value will do; 0 is avoided, LIST replies carry it. */
#define NBD_META_ID_BASE_ALLOCATION 1u

struct nbd_meta_request {
  const uint8_t *name;        /* export name, not NUL-terminated */
  uint32_t namelen;
  uint32_t nqueries;
  bool base_allocation;       /* some query matched base:allocation */
};

/* Parse `len` bytes of a LIST (set = false) or SET payload.  0, -EINVAL
 * if malformed, -E2BIG if a name or query is over NBD_MAX_STRING. */
int nbd_meta_parse(const uint8_t *data, uint32_t len, bool set,
                   struct nbd_meta_request *out);

#endif
