/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "invfilter.h"

static uint32_t
chain_of(const struct fc_invfilter *f, oblock_t ob)
{
  return (uint32_t)((ob.n * 0x9E3779B97F4A7C15ull) >> f->shift);
}

int
fc_invfilter_init(struct fc_invfilter *f, uint32_t expected)
{
  uint32_t n = 64;

  memset(f, 0, sizeof *f);
  while (n < expected && n < (1u << 28))
    n <<= 1;
  f->chains = calloc(n, sizeof *f->chains);
  if (!f->chains)
    return -ENOMEM;
  f->mask = n - 1;
  f->shift = 64 - (uint32_t)__builtin_ctz(n);
  return 0;
}

void
fc_invfilter_destroy(struct fc_invfilter *f)
{
  free(f->chains);
  free(f->nodes);
  memset(f, 0, sizeof *f);
}

bool
fc_invfilter_contains(const struct fc_invfilter *f, oblock_t ob)
{
  if (!f->chains)
    return false;
  for (uint32_t i = f->chains[chain_of(f, ob)]; i; i = f->nodes[i - 1].next)
    if (f->nodes[i - 1].oblock == ob.n)
      return true;
  return false;
}

int
fc_invfilter_add(struct fc_invfilter *f, oblock_t ob)
{
  uint32_t c, idx;

  if (!f->chains)
    return -EINVAL;
  c = chain_of(f, ob);
  if (fc_invfilter_contains(f, ob))
    return 0;
  if (f->free_head) {
    idx = f->free_head;
    f->free_head = f->nodes[idx - 1].next;
  } else {
    if (f->nr_nodes == f->cap_nodes) {
      uint32_t cap = f->cap_nodes ? f->cap_nodes * 2 : 1024;
      struct fc_if_node *nn = realloc(f->nodes, (size_t)cap * sizeof *nn);
      if (!nn)
        return -ENOMEM;
      f->nodes = nn;
      f->cap_nodes = cap;
    }
    idx = ++f->nr_nodes;
  }
  f->nodes[idx - 1].oblock = ob.n;
  f->nodes[idx - 1].next = f->chains[c];
  f->chains[c] = idx;
  f->count++;
  return 1;
}

bool
fc_invfilter_remove(struct fc_invfilter *f, oblock_t ob)
{
  uint32_t *link;

  if (!f->chains)
    return false;
  link = &f->chains[chain_of(f, ob)];
  while (*link) {
    uint32_t idx = *link;
    if (f->nodes[idx - 1].oblock == ob.n) {
      *link = f->nodes[idx - 1].next;
      f->nodes[idx - 1].next = f->free_head;
      f->free_head = idx;
      f->count--;
      return true;
    }
    link = &f->nodes[idx - 1].next;
  }
  return false;
}

void
fc_invfilter_clear(struct fc_invfilter *f)
{
  if (!f->chains)
    return;
  memset(f->chains, 0, ((size_t)f->mask + 1) * sizeof *f->chains);
  f->nr_nodes = 0;
  f->free_head = 0;
  f->count = 0;
}

void
fc_invfilter_for_each(const struct fc_invfilter *f,
                      void (*fn)(void *opaque, oblock_t ob), void *opaque)
{
  for (uint32_t c = 0; f->chains && c <= f->mask; c++)
    for (uint32_t i = f->chains[c]; i; i = f->nodes[i - 1].next)
      fn(opaque, to_oblock(f->nodes[i - 1].oblock));
}

size_t
fc_invfilter_memory(const struct fc_invfilter *f)
{
  return ((size_t)f->mask + 1) * sizeof *f->chains +
         (size_t)f->cap_nodes * sizeof *f->nodes;
}
