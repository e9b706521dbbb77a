/* SPDX-License-Identifier: Apache-2.0 */
/* Memory for the tables that grow with the cache: the block table (24
 * bytes per cache block), a volume's hash buckets and the free stack.  At
 * 1 TiB of 4 KiB blocks the block table alone is 6 GiB, and a hit's
 * lookup, an eviction and every list walk land in it at random: with 4 KiB
 * pages nearly each such access also misses the TLB.  A table of
 * FC_BIGTABLE_MIN or more is mapped on its own, 2 MiB-aligned and marked
 * MADV_HUGEPAGE, so that where the host allows transparent huge pages
 * (enabled = always or madvise) one TLB entry covers 2 MiB of it.  A
 * smaller table comes from calloc: the TLB's reach in 4 KiB pages (a few
 * thousand entries, some MiB) covers most of it anyway, and a mapping of
 * its own would round it up to 2 MiB.  On the development VM the walk of
 * a 24 MiB to 1.5 GiB table ran 1.16-1.48x faster and a lookup 1.11-1.17x
 * (fcache_agent/tools/table_walk.c, doc/research/benchmarks.rst). */
#ifndef FCACHE_BIGTABLE_H
#define FCACHE_BIGTABLE_H

#include <stddef.h>

/* A huge page, and the size from which a table gets its own mapping. */
#define FC_BIGTABLE_HUGE ((size_t)2 << 20)
#define FC_BIGTABLE_MIN ((size_t)8 << 20)

/* nmemb * size zeroed bytes, or NULL (errno ENOMEM, also on overflow). */
void *fc_bigtable_alloc(size_t nmemb, size_t size);
/* Frees what fc_bigtable_alloc(nmemb, size) returned; NULL is a no-op. */
void fc_bigtable_free(void *table, size_t nmemb, size_t size);

#endif
