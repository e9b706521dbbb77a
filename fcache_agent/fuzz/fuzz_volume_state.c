/* SPDX-License-Identifier: Apache-2.0 */
/* A volume's persisted parameters (engine/volume.c): the input is
 * <state_dir>/volumes/<id>.json, which fc_volume_params_load() reads for
 * every volume when the agent starts.  What loads must be a volume the
 * agent accepts: a valid id, a terminated origin, a size and a tag. */
#include "fuzz.h"
#include "engine/volume.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *path = fuzz_file("vol.json", data, size);
  struct fc_volume_params p;
  char err[512];

  if (fc_volume_params_load(path, &p, err, sizeof err) == 0) {
    if (strnlen(p.id, sizeof p.id) == sizeof p.id ||
        strnlen(p.origin, sizeof p.origin) == sizeof p.origin ||
        strnlen(p.migration, sizeof p.migration) == sizeof p.migration ||
        !fc_volume_id_valid(p.id) || p.cache_size == 0 || p.tag == 0)
      abort();
  }
  return 0;
}
