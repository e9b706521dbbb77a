/* SPDX-License-Identifier: Apache-2.0 */
/* pread/pwrite that finish the whole transfer or fail with -errno. */
#ifndef FCACHE_FDIO_H
#define FCACHE_FDIO_H

#include <stddef.h>
#include <sys/types.h>

int fc_full_pread(int fd, void *buf, size_t len, off_t off);
int fc_full_pwrite(int fd, const void *buf, size_t len, off_t off);

struct iovec;
/* The same, scattered over (or gathered from) iov[0..n): one system call
 * for a run of buffers that are contiguous on disk.  iov is consumed (its
 * entries are advanced past what was transferred). */
int fc_full_preadv(int fd, struct iovec *iov, int n, off_t off);
int fc_full_pwritev(int fd, struct iovec *iov, int n, off_t off);
/* Skip n bytes of the vector *iov[0..*cnt): a short transfer resumes where
 * it stopped. */
void fc_iov_advance(struct iovec **iov, int *cnt, size_t n);

/* Send every byte of iov[0..n) (consumed) on a socket, with MSG_NOSIGNAL
 * so that a vanished peer is an -EPIPE, not a SIGPIPE.  0, or -errno
 * (EAGAIN when a SO_SNDTIMEO expired). */
int fc_full_sendmsg(int fd, struct iovec *iov, int n);

/* fsync the directory dir, so that a rename or unlink in it is durable. */
int fc_fsync_dir(const char *dir);

/* Replace the file at path (in directory dir) by len bytes of data: write
 * "<path>.tmp", sync it, rename it over path, sync dir.  A crash leaves
 * the old file or the new one, and once this returns 0 the new one
 * survives a power cut. */
int fc_replace_file_durable(const char *dir, const char *path, const void *data,
                            size_t len);

#endif
