/* SPDX-License-Identifier: Apache-2.0 */
/* The destination's record of superseded blocks (common/superseded.c):
 * the input is <state_dir>/volumes/<id>.superseded, which
 * fc_superseded_load() reads when a failed migration is settled.  A torn
 * last record is ignored, so the list has size / 8 entries, each the
 * little-endian value of its 8 bytes. */
#include "fuzz.h"
#include "common/superseded.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *path = fuzz_file("vol.superseded", data, size);
  uint64_t *list = NULL;
  uint32_t n = 0;

  if (fc_superseded_load(path, &list, &n) == 0) {
    if (n != size / 8)
      abort();
    for (uint32_t i = 0; i < n; i++) {
      uint64_t v = 0;
      for (int b = 0; b < 8; b++)
        v |= (uint64_t)data[8 * i + b] << (8 * b);
      if (list[i] != v)
        abort();
    }
  }
  free(list);
  return 0;
}
