/* SPDX-License-Identifier: Apache-2.0 */
/* Logging.  The destination and threshold are process-wide by nature (one
 * stderr, one syslog connection): they are set once by main() before any
 * thread starts and only read afterwards. */
#ifndef FCACHE_LOG_H
#define FCACHE_LOG_H

#include <stdbool.h>

enum fc_log_level { FC_LOG_ERROR = 0, FC_LOG_WARNING, FC_LOG_INFO, FC_LOG_DEBUG };
enum fc_log_target { FC_LOG_STDERR = 0, FC_LOG_SYSLOG };

void fc_log_setup(enum fc_log_target target, enum fc_log_level threshold);
bool fc_log_enabled(enum fc_log_level level);

/* Whether JOURNAL_STREAM's "<device>:<inode>" names the file fd is open on:
 * then fd is systemd's stream to journald (sd-daemon(3)).  fc_log_setup()
 * asks this of stderr and, if so, prefixes lines with "<N>". */
bool fc_log_stream_is_journal(const char *journal_stream, int fd);
/* The syslog priority (LOG_ERR ... LOG_DEBUG) of a level. */
int fc_log_priority(enum fc_log_level level);
void fc_log(enum fc_log_level level, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));

/* Parse "error|warning|info|debug" / "stderr|syslog"; -EINVAL if unknown. */
int fc_log_level_parse(const char *s, enum fc_log_level *out);
int fc_log_target_parse(const char *s, enum fc_log_target *out);

/* The inverse of the parsers: "error" ... "debug", "stderr" / "syslog". */
const char *fc_log_level_name(enum fc_log_level level);
const char *fc_log_target_name(enum fc_log_target target);

#define log_error(...) fc_log(FC_LOG_ERROR, __VA_ARGS__)
#define log_warning(...) fc_log(FC_LOG_WARNING, __VA_ARGS__)
#define log_info(...) fc_log(FC_LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
  do { if (fc_log_enabled(FC_LOG_DEBUG)) fc_log(FC_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
