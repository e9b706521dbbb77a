/* The engines this build has; see engine.h. */
#include <string.h>

#include "engine.h"

const struct fc_engine_ops *
fc_engine_find(const char *name)
{
  static const struct fc_engine_ops *const all[] = { &fc_ucache_engine, &fc_dm_engine };

  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (!strcmp(all[i]->name, name))
      return all[i];
  return NULL;
}
