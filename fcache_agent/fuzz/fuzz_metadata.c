/* SPDX-License-Identifier: Apache-2.0 */
/* The ucache engine's persisted metadata (ucache/metadata.c) as the agent
 * reads it at start: the input becomes <state_dir>/cache.meta and a real
 * agent is opened over it (fc_agent_open with the ucache engine:
 * fc_md_open, the geometry check, recovery's record scan with
 * fc_md_record_ok, giving blocks back to their volume), then closed.
 *
 * One volume is attached in the state directory, with tag VOL_TAG, over
 * the 1 MiB origin of fuzz_agent.h, so records naming that tag are
 * recovered into it.  The cache is 64 blocks of 4 KiB.
 *
 * Both the header and every record carry a CRC-32C that random bytes
 * almost never match, so the input says which ones the harness fixes up:
 *   byte 0, bit 0: seal the header (compute its CRC)
 *           bit 1: seal every non-zero record
 *           bit 2: give the header this cache's magic, version, geometry
 *                  and record size (state is kept from the input)
 *   bytes 1..32:   the header (the first 32 bytes of the file; the rest
 *                  of its 4 KiB is zero)
 *   bytes 33..:    records, 32 bytes each, from cache block 0 on; with
 *                  bit 2 the file is padded to the 64 records.
 * The header layout below is metadata.c's struct md_header; if that
 * changes, the fix-ups stop helping but nothing breaks.
 */
#include "fuzz_agent.h"
#include "common/crc32c.h"
#include "engine/volume.h"
#include "ucache/metadata.h"

#define BLOCK FUZZ_CACHE_BLOCK
#define NR_BLOCKS FUZZ_CACHE_BLOCKS
#define VOL_TAG 0x0123456789abcdefull

static struct fc_volume_params vol;
static char meta_path[FC_PATH_MAX + 32], vol_dir[FC_PATH_MAX + 32];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  char err[512];

  fuzz_agent_config();
  snprintf(meta_path, sizeof meta_path, "%s/cache.meta", fuzz_cfg.state_dir);
  snprintf(vol_dir, sizeof vol_dir, "%s/volumes", fuzz_cfg.state_dir);
  snprintf(vol.id, sizeof vol.id, "vol-1");
  snprintf(vol.origin, sizeof vol.origin, "%s", fuzz_origin);
  vol.cache_size = fuzz_cfg.cache_size;
  vol.write_policy = FC_WRITE_BACK;
  vol.tag = VOL_TAG;
  if (mkdir(fuzz_cfg.state_dir, 0700) || mkdir(vol_dir, 0700) ||
      fc_volume_params_save(vol_dir, &vol, err, sizeof err))
    abort();
  return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
  memcpy(p, &v, 4);             /* the file is in host order (x86: LE) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t mode, *file;
  size_t nrec, len;
  struct fc_agent *agent = NULL;
  char err[1024];

  if (size < 1 + 32)
    return 0;
  mode = data[0];
  nrec = (size - 33) / 32;
  if ((mode & 4) && nrec < NR_BLOCKS)
    nrec = NR_BLOCKS;
  len = FC_MD_HEADER_SIZE + nrec * 32;
  file = calloc(1, len);
  if (!file)
    abort();
  memcpy(file, data + 1, 32);
  memcpy(file + FC_MD_HEADER_SIZE, data + 33, (size - 33) / 32 * 32);
  if (mode & 4) {
    memcpy(file, FC_MD_MAGIC, 8);
    put32(file + 8, FC_MD_VERSION);
    put32(file + 12, BLOCK);
    put32(file + 16, NR_BLOCKS);
    put32(file + 24, 32);
  }
  if (mode & 1)
    put32(file + 28, crc32c(0, file, 28));
  if (mode & 2) {
    for (size_t i = 0; i < nrec; i++) {
      uint8_t *rec = file + FC_MD_HEADER_SIZE + 32 * i;
      static const uint8_t zero[32];
      if (memcmp(rec, zero, 32))
        put32(rec + 28, crc32c(0, rec, 28));
    }
  }
  {
    int fd = open(meta_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, file, len) != (ssize_t)len)
      abort();
    close(fd);
  }
  free(file);
  /* A run may have rewritten or dropped the volume's state: start each
   * input from the same one. */
  if (fc_volume_params_save(vol_dir, &vol, err, sizeof err))
    abort();

  err[0] = '\0';
  if (fc_agent_open(&fuzz_cfg, fc_engine_find("ucache"), &agent, err, sizeof err) == 0)
    fc_agent_close(agent);
  return 0;
}
