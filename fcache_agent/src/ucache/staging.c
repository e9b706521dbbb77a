#include <errno.h>
#include <stdlib.h>

#include "staging.h"

int
fc_staging_init(struct fc_staging *st, uint32_t window)
{
  uint32_t n = 2;

  while (n < window && n < (1u << 30))
    n <<= 1;
  st->slots = calloc(n, sizeof *st->slots);
  st->age = calloc(n / 2, sizeof *st->age);
  if (!st->slots || !st->age) {
    fc_staging_destroy(st);
    return -ENOMEM;
  }
  st->mask = n - 1;
  return 0;
}

void
fc_staging_destroy(struct fc_staging *st)
{
  free(st->slots);
  free(st->age);
  st->slots = NULL;
  st->age = NULL;
}

bool
fc_staging_miss(struct fc_staging *st, oblock_t ob)
{
  /* Top bits of the product: they mix best (Fibonacci hashing). */
  uint32_t nsets = (st->mask + 1) / 2;
  uint32_t set = nsets > 1 ?
    (uint32_t)((ob.n * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctz(nsets))) : 0;
  uint64_t key = ob.n + 1;
  uint64_t *way = &st->slots[set * 2];

  for (int i = 0; i < 2; i++) {
    if (way[i] == key) {
      way[i] = 0;           /* admitted: the cache remembers it now */
      return true;
    }
  }
  /* Replace the way that was not written last. */
  /* An empty way (never used, or freed by an admission) before a staged one. */
  int victim = !way[0] ? 0 : !way[1] ? 1 : st->age[set] ^ 1;
  way[victim] = key;
  st->age[set] = (uint8_t)victim;
  return false;
}
