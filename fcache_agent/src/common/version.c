/* SPDX-License-Identifier: Apache-2.0 */
#include "version.h"

#ifndef FCACHE_VERSION
#error "FCACHE_VERSION is not set: build with the Makefile, or pass -DFCACHE_VERSION='\"x.y.z\"'"
#endif

const char *fc_version(void)
{
  return FCACHE_VERSION;
}
