/* SPDX-License-Identifier: Apache-2.0 */
/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
 * iSCSI, ext4 and btrfs metadata.  Chosen over CRC-32 (zlib) because it
 * detects more error patterns in the block sizes we checksum and because
 * x86-64 CPUs compute it in hardware (SSE4.2), which crc32c() uses.
 */
#ifndef FCACHE_CRC32C_H
#define FCACHE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Returns the CRC-32C of buf[0..len) continued from `crc`, the result of a
 * previous call (0 to start).  The initial and final inversions are
 * applied inside, so crc32c(crc32c(0, a, n), b, m) equals the CRC of a
 * followed by b, and crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* The same with the tables only: what crc32c() uses on a CPU without
 * SSE4.2, and the tests' second opinion on the hardware path. */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);
#if defined(__x86_64__)
/* The same with the crc32 instruction (crc32c_sse42.c): only on a CPU
 * with SSE4.2. */
uint32_t crc32c_sse42(uint32_t crc, const void *buf, size_t len);
#endif

#endif
