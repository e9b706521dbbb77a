/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "bigtable.h"

static size_t
round_up_huge(size_t bytes)
{
  return (bytes + FC_BIGTABLE_HUGE - 1) & ~(FC_BIGTABLE_HUGE - 1);
}

void *
fc_bigtable_alloc(size_t nmemb, size_t size)
{
  size_t bytes, len, head;
  uint8_t *map, *table;

  if (size && nmemb > SIZE_MAX / size) {
    errno = ENOMEM;
    return NULL;
  }
  bytes = nmemb * size;
  if (bytes < FC_BIGTABLE_MIN)
    return calloc(nmemb ? nmemb : 1, size ? size : 1);
  if (bytes > SIZE_MAX - 2 * FC_BIGTABLE_HUGE) {
    errno = ENOMEM;
    return NULL;
  }
  /* mmap aligns to a page only: map one huge page more and trim, so that
   * every 2 MiB of the table can be one huge page. */
  len = round_up_huge(bytes);
  map = mmap(NULL, len + FC_BIGTABLE_HUGE, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return NULL;
  table = (uint8_t *)(((uintptr_t)map + FC_BIGTABLE_HUGE - 1) &
                      ~(uintptr_t)(FC_BIGTABLE_HUGE - 1));
  head = (size_t)(table - map);
  if (head)
    munmap(map, head);
  munmap(table + len, FC_BIGTABLE_HUGE - head);
  /* EINVAL where the kernel has no THP: the table still works, in small
   * pages. */
  (void)madvise(table, len, MADV_HUGEPAGE);
  return table;
}

void
fc_bigtable_free(void *table, size_t nmemb, size_t size)
{
  size_t bytes = nmemb * size;

  if (!table)
    return;
  if (bytes < FC_BIGTABLE_MIN) {
    free(table);
    return;
  }
  munmap(table, round_up_huge(bytes));
}
