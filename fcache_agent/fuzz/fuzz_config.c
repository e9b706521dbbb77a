/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's INI configuration file (common/config.c): the input is the
 * file, read by fc_config_load() over the defaults as `fcache-agent
 * --config` does.  A file that loads must leave a configuration the agent
 * could start with: every string terminated within its field. */
#include "fuzz.h"
#include "common/config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *path = fuzz_file("agent.conf", data, size);
  struct fc_config cfg;
  char err[512];

  fc_config_defaults(&cfg);
  err[0] = '\0';
  if (fc_config_load(path, &cfg, err, sizeof err) == 0) {
    /* strnlen reads no further than the field: an unterminated string
     * would be caught by the check, not by ASan reading past it. */
    if (strnlen(cfg.control_socket, sizeof cfg.control_socket) ==
          sizeof cfg.control_socket ||
        strnlen(cfg.state_dir, sizeof cfg.state_dir) == sizeof cfg.state_dir ||
        strnlen(cfg.cache_path, sizeof cfg.cache_path) == sizeof cfg.cache_path ||
        strnlen(cfg.export_dir, sizeof cfg.export_dir) == sizeof cfg.export_dir ||
        strnlen(cfg.engine, sizeof cfg.engine) == sizeof cfg.engine ||
        cfg.block_size < 512 || (cfg.block_size & (cfg.block_size - 1)))
      abort();
  } else if (strnlen(err, sizeof err) == sizeof err) {
    abort();
  }
  return 0;
}
