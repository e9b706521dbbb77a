/* SPDX-License-Identifier: Apache-2.0 */
/* What huge pages buy the tables that grow with the cache
 * (common/bigtable.h): the same block table, LRU and hash map laid out in
 * 4 KiB pages (the peer: anonymous mappings marked MADV_NOHUGEPAGE) and as
 * fc_bigtable_alloc gives them, measured in turns in one process.
 *
 *   table_walk BLOCKS [RUNS]
 *
 * BLOCKS cache blocks (1048576 is a 4 GiB cache of 4 KiB blocks) are
 * linked into the LRU in random order, as a VM's hits leave it, and mapped
 * from random origin blocks.  Two measures, per block: a walk of the whole
 * LRU from both ends (fc_lru_walk_both_ends: a migration's lists and a
 * leaving volume, under the volume's lock) and a lookup of a random origin
 * block that is cached (fc_blockmap_lookup: every request).  Prints the
 * median of RUNS (default 5) of each, and the ratio 4 KiB pages /
 * fc_bigtable (above 1: the huge pages are faster).  A table smaller than
 * FC_BIGTABLE_MIN is in 4 KiB pages both ways: there the ratio is the
 * tool's own noise, from where the pages land in physical memory (0.7-1.04
 * with 262144 blocks on the development VM). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common/bigtable.h"
#include "common/clock.h"
#include "common/blockmap.h"
#include "common/lru.h"

#define LOOKUPS (1u << 22)
#define MAX_RUNS 99

struct layout {
  bool huge;
  struct fc_entry *table;
  struct fc_blockmap map;
  struct fc_lru lru;
};

static uint64_t
next_random(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *
small_pages(size_t bytes)
{
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  if (p == MAP_FAILED)
    return NULL;
  (void)madvise(p, bytes, MADV_NOHUGEPAGE);
  return p;
}

static uint32_t
buckets_for(uint32_t blocks)
{
  uint32_t n = 16;

  while (n < blocks && n < (1u << 31))
    n <<= 1;
  return n;
}

/* The same contents in either layout: order[] is the LRU from the head,
 * cblock cb caches origin block oblocks[cb]. */
static int
layout_build(struct layout *l, uint32_t blocks, const uint32_t *order,
             const uint64_t *oblocks)
{
  uint32_t nb = buckets_for(blocks);

  if (l->huge) {
    l->table = fc_bigtable_alloc(blocks, sizeof *l->table);
    if (!l->table || fc_blockmap_init(&l->map, blocks))
      return -1;
  } else {
    l->table = small_pages((size_t)blocks * sizeof *l->table);
    l->map.buckets = small_pages((size_t)nb * sizeof *l->map.buckets);
    if (!l->table || !l->map.buckets)
      return -1;
    memset(l->map.buckets, 0xff, (size_t)nb * sizeof *l->map.buckets);
    l->map.mask = nb - 1;
    l->map.shift = 64 - (uint32_t)__builtin_ctz(nb);
    l->map.count = 0;
  }
  for (uint32_t i = 0; i < blocks; i++) {
    l->table[i].hash_next = l->table[i].lru_prev = l->table[i].lru_next =
      CBLOCK_NONE;
    l->table[i].oblock = oblocks[i];
    l->table[i].flags = 0;
  }
  fc_lru_init(&l->lru);
  for (uint32_t i = 0; i < blocks; i++) {
    fc_lru_push_tail(&l->lru, l->table, to_cblock(order[i]));
    fc_blockmap_insert(&l->map, l->table, to_cblock(order[i]));
  }
  return 0;
}

static void
layout_free(struct layout *l, uint32_t blocks)
{
  if (l->huge) {
    fc_bigtable_free(l->table, blocks, sizeof *l->table);
    fc_blockmap_destroy(&l->map);
    return;
  }
  munmap(l->table, (size_t)blocks * sizeof *l->table);
  munmap(l->map.buckets, ((size_t)l->map.mask + 1) * sizeof *l->map.buckets);
}

static void
sum_rank(void *ctx, uint32_t cb, uint32_t rank)
{
  *(uint64_t *)ctx += rank ^ cb;
}

static double
walk_ns(const struct layout *l, uint32_t blocks, uint64_t *sink)
{
  struct timespec t0, t1;

  clock_gettime(CLOCK_MONOTONIC, &t0);
  fc_lru_walk_both_ends(&l->lru, l->table, sum_rank, sink);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)fc_us_between(&t0, &t1) * 1e3 / blocks;
}

static double
lookup_ns(const struct layout *l, const uint64_t *oblocks, uint32_t blocks,
          uint64_t seed, uint64_t *sink)
{
  struct timespec t0, t1;

  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint32_t i = 0; i < LOOKUPS; i++) {
    oblock_t ob = { oblocks[next_random(&seed) % blocks] };
    *sink += fc_blockmap_lookup(&l->map, l->table, ob).n;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)fc_us_between(&t0, &t1) * 1e3 / LOOKUPS;
}

static int
cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return (x > y) - (x < y);
}

static double
median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int
main(int argc, char **argv)
{
  double walk[2][MAX_RUNS], look[2][MAX_RUNS];
  struct layout lay[2] = { { .huge = false }, { .huge = true } };
  uint32_t *order = NULL;
  uint64_t *oblocks = NULL, seed = 0x9e3779b97f4a7c15ull, sink = 0;
  unsigned long blocks_arg;
  uint32_t blocks;
  int runs = 5, rc = 1;

  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: table_walk BLOCKS [RUNS]\n");
    return 2;
  }
  blocks_arg = strtoul(argv[1], NULL, 0);
  if (argc == 3)
    runs = atoi(argv[2]);
  if (blocks_arg < 1024 || blocks_arg >= CBLOCK_NONE || runs < 1 || runs > MAX_RUNS) {
    fprintf(stderr, "table_walk: BLOCKS must be 1024..%u, RUNS 1..%d\n",
            CBLOCK_NONE - 1, MAX_RUNS);
    return 2;
  }
  blocks = (uint32_t)blocks_arg;
  order = malloc((size_t)blocks * sizeof *order);
  oblocks = malloc((size_t)blocks * sizeof *oblocks);
  if (!order || !oblocks)
    goto out;
  for (uint32_t i = 0; i < blocks; i++) {
    order[i] = i;
    /* Distinct origin blocks spread over a volume 16 times the cache. */
    oblocks[i] = (uint64_t)i * 16 + next_random(&seed) % 16;
  }
  for (uint32_t i = blocks - 1; i > 0; i--) {
    uint32_t j = (uint32_t)(next_random(&seed) % (i + 1)), t = order[i];

    order[i] = order[j];
    order[j] = t;
  }
  for (int k = 0; k < 2; k++) {
    if (layout_build(&lay[k], blocks, order, oblocks)) {
      fprintf(stderr, "table_walk: out of memory\n");
      goto out;
    }
  }
  for (int r = 0; r < runs; r++) {
    /* Take turns going first. */
    for (int i = 0; i < 2; i++) {
      int k = (r + i) % 2;

      walk[k][r] = walk_ns(&lay[k], blocks, &sink);
      look[k][r] = lookup_ns(&lay[k], oblocks, blocks, seed + (uint64_t)r, &sink);
    }
  }
  {
    double ws = median(walk[0], runs), wh = median(walk[1], runs);
    double ls = median(look[0], runs), lh = median(look[1], runs);

    printf("blocks %u (table %zu MiB), medians of %d runs, ns per block\n",
           blocks, (size_t)blocks * sizeof(struct fc_entry) >> 20, runs);
    printf("lru walk   4 KiB pages %.2f  fc_bigtable %.2f  ratio %.3f\n",
           ws, wh, ws / wh);
    printf("lookup     4 KiB pages %.2f  fc_bigtable %.2f  ratio %.3f\n",
           ls, lh, ls / lh);
    printf("(checksum %llu)\n", (unsigned long long)sink);
  }
  rc = 0;
out:
  for (int k = 0; k < 2; k++)
    if (lay[k].table)
      layout_free(&lay[k], blocks);
  free(order);
  free(oblocks);
  return rc;
}
