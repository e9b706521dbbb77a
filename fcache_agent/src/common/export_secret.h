/* SPDX-License-Identifier: Apache-2.0 */
/* An export's capability: the fresh random name (128 bits, lowercase hex)
 * that a ucache export answers to, and no other.  The socket is open to
 * every member of export_group (every VM's QEMU under libvirt), so its
 * mode alone cannot tell one VM's QEMU from another's; the name, which
 * only the orchestrator learns (volume-attach's export_uri) and passes
 * on in the guest's domain XML, can (doc/admin/security.rst). */
#ifndef FCACHE_EXPORT_SECRET_H
#define FCACHE_EXPORT_SECRET_H

#include <stdbool.h>
#include <stddef.h>

#define FC_EXPORT_SECRET_BYTES 16
#define FC_EXPORT_SECRET_LEN (2 * FC_EXPORT_SECRET_BYTES)

/* Fill out (FC_EXPORT_SECRET_LEN + 1 bytes) with a new secret from
 * getrandom(2).  0, or -errno. */
int fc_export_secret_new(char *out);

/* True when s is exactly FC_EXPORT_SECRET_LEN lowercase hex digits. */
bool fc_export_secret_valid(const char *s);

#endif
