/* pread/pwrite that finish the whole transfer or fail with -errno. */
#ifndef FCACHE_FDIO_H
#define FCACHE_FDIO_H

#include <stddef.h>
#include <sys/types.h>

int fc_full_pread(int fd, void *buf, size_t len, off_t off);
int fc_full_pwrite(int fd, const void *buf, size_t len, off_t off);

#endif
