/* SPDX-License-Identifier: Apache-2.0 */
/* Agent configuration file: a small INI dialect, parsed strictly.
 *
 * Strict because the agent manages other people's data: a misspelt key or
 * a value that does not mean what the operator thinks must stop the agent
 * at start-up with the file and line, not be ignored until it matters.
 *
 * Dialect: "[section]" lines; "key = value" lines (the first '=' splits,
 * so values may contain '=' and inner spaces); full-line comments starting
 * with '#' or ';'; a '#' or ';' preceded by whitespace starts a trailing
 * comment (so "a#b" is a value but "1G  # one gibibyte" is "1G"); leading
 * and trailing whitespace (including a CR from CRLF files) is ignored.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

/* Longest accepted line; far beyond any legal key = value. */
#define LINE_MAX_LEN 4096

#define MIN_BLOCK_SIZE 512u
#define MAX_BLOCK_SIZE (1024u * 1024u)
/* cblock_t is 32-bit and UINT32_MAX is CBLOCK_NONE. */
#define MAX_CACHE_BLOCKS ((uint64_t)UINT32_MAX - 1)

enum key_type {
  K_STRING,       /* free text, only length-checked */
  K_PATH,         /* absolute path */
  K_OPT_PATH,     /* absolute path, or "" for none */
  K_SOCKET,       /* absolute path short enough for sun_path */
  K_HOSTPORT,     /* host:port */
  K_ENGINE,
  K_SIZE,         /* uint64_t byte count with units */
  K_BLOCK_SIZE,   /* uint32_t power of two with units */
  K_UINT,         /* unsigned in [min, max] */
  K_LEVEL,
  K_TARGET,
  K_TLS,          /* pinned | psk | x509 | none */
  K_PREFIXES,     /* comma-separated absolute paths */
  K_CHOICE,       /* one of the '|'-separated names in choices */
  K_FRACTION,     /* a decimal fraction, STAGING_FRACTION_MIN..MAX */
  K_WINDOW,       /* auto, or seconds in [min, max] */
};

/* CloudCache sizes the staging area at 0.1 % to 1 % of the flash cache
 * (§4.4.2): below, it forgets reuses before they come; above, it holds
 * memory for no gain. */
#define STAGING_FRACTION_MIN 0.001
#define STAGING_FRACTION_MAX 0.01

struct key_desc {
  const char *name;
  enum key_type type;
  size_t offset;
  size_t size;        /* field size, for strings */
  unsigned min, max;  /* for K_UINT */
  const char *choices;  /* for K_CHOICE; K_PREFIXES: an example */
  size_t count_offset;  /* for K_PREFIXES: where the number of entries goes */
};

#define STR_KEY(field, type) \
  { #field, type, offsetof(struct fc_config, field), \
    sizeof(((struct fc_config *)0)->field), 0, 0, NULL, 0 }
#define UINT_KEY(field, lo, hi) \
  { #field, K_UINT, offsetof(struct fc_config, field), \
    sizeof(unsigned), lo, hi, NULL, 0 }
#define OTHER_KEY(field, type) \
  { #field, type, offsetof(struct fc_config, field), 0, 0, 0, NULL, 0 }
#define PREFIXES_KEY(field, count, example) \
  { #field, K_PREFIXES, offsetof(struct fc_config, field), 0, 0, 0, example, \
    offsetof(struct fc_config, count) }
#define CHOICE_KEY(field, list) \
  { #field, K_CHOICE, offsetof(struct fc_config, field), \
    sizeof(((struct fc_config *)0)->field), 0, 0, list, 0 }

enum key_index {
  KEY_CONTROL_SOCKET, KEY_CONTROL_GROUP, KEY_STATE_DIR, KEY_ENGINE,
  KEY_CACHE_PATH, KEY_CACHE_SIZE, KEY_BLOCK_SIZE, KEY_MIGRATION_LISTEN,
  KEY_EXPORT_DIR, KEY_LOG_LEVEL, KEY_LOG_TARGET, KEY_NBD_THREADS,
  KEY_ORIGIN_CONNECTIONS, KEY_WRITEBACK_INTERVAL_MS, KEY_DIRTY_HIGH_PERCENT,
  KEY_DM_PREFIX, KEY_EXPORT_GROUP, KEY_MIGRATION_TLS, KEY_MIGRATION_TLS_DIR,
  KEY_CONTROL_ADMIN_GROUP, KEY_ORIGIN_PREFIXES, KEY_ORIGIN_TLS_DIR,
  KEY_ORIGIN_TLS_PSK_FILE, KEY_ALLOCATION, KEY_ALLOCATION_WINDOW,
  KEY_ALLOCATION_SPARE, KEY_ALLOCATION_HEADROOM_PERCENT, KEY_STAGING_FRACTION,
  KEY_RWS_PREDICTOR, KEY_RWS_TRACKER, KEY_EXPORT_CLIENTS, KEY_ORIGIN_RETRY_MS,
  KEY_ORIGIN_BLOCK_DEVICES, KEY_ORIGIN_RBD_DIRS, KEY_ORIGIN_RBD_MS_MODE,
  KEY_ORIGIN_STALL_TIMEOUT_S, KEY_EXPORT_SEND_TIMEOUT_S,
  KEY_CONTROL_IDLE_TIMEOUT_S, KEY_METRICS_PATH, KEY_METRICS_INTERVAL,
  KEY_MIGRATION_PRELOAD_DEPTH, KEY_CLOUDCACHE_VARIANT, KEY_CLOUDCACHE_ON_DEMAND_S,
  KEY_ALLOCATION_WINDOW_MIN, KEY_ALLOCATION_WINDOW_MAX, N_KEYS
};

static const struct key_desc keys[N_KEYS] = {
  [KEY_CONTROL_SOCKET] = STR_KEY(control_socket, K_SOCKET),
  [KEY_CONTROL_GROUP] = STR_KEY(control_group, K_STRING),
  [KEY_CONTROL_ADMIN_GROUP] = STR_KEY(control_admin_group, K_STRING),
  [KEY_STATE_DIR] = STR_KEY(state_dir, K_PATH),
  [KEY_ENGINE] = STR_KEY(engine, K_ENGINE),
  [KEY_CACHE_PATH] = STR_KEY(cache_path, K_PATH),
  [KEY_CACHE_SIZE] = OTHER_KEY(cache_size, K_SIZE),
  [KEY_BLOCK_SIZE] = OTHER_KEY(block_size, K_BLOCK_SIZE),
  [KEY_MIGRATION_LISTEN] = STR_KEY(migration_listen, K_HOSTPORT),
  [KEY_EXPORT_DIR] = STR_KEY(export_dir, K_PATH),
  [KEY_EXPORT_GROUP] = STR_KEY(export_group, K_STRING),
  [KEY_LOG_LEVEL] = OTHER_KEY(log_level, K_LEVEL),
  [KEY_LOG_TARGET] = OTHER_KEY(log_target, K_TARGET),
  [KEY_NBD_THREADS] = UINT_KEY(nbd_threads, 1, 64),
  [KEY_ORIGIN_CONNECTIONS] = UINT_KEY(origin_connections, 1, 64),
  /* An NBD origin takes 256 requests per connection at once. */
  [KEY_MIGRATION_PRELOAD_DEPTH] = UINT_KEY(migration_preload_depth, 1, 1024),
  /* An hour is already far too lazy for dirty data; 0 would spin. */
  [KEY_WRITEBACK_INTERVAL_MS] = UINT_KEY(writeback_interval_ms, 1, 3600000),
  [KEY_DIRTY_HIGH_PERCENT] = UINT_KEY(dirty_high_percent, 0, 100),
  [KEY_DM_PREFIX] = STR_KEY(dm_prefix, K_STRING),
  [KEY_MIGRATION_TLS] = OTHER_KEY(migration_tls, K_TLS),
  [KEY_MIGRATION_TLS_DIR] = STR_KEY(migration_tls_dir, K_PATH),
  [KEY_ORIGIN_PREFIXES] = PREFIXES_KEY(origin_prefixes, n_origin_prefixes,
                                       FC_ORIGIN_PREFIXES_DEFAULT),
  [KEY_ORIGIN_RBD_DIRS] = PREFIXES_KEY(origin_rbd_dirs, n_origin_rbd_dirs,
                                       FC_ORIGIN_RBD_DIRS_DEFAULT),
  /* secure: msgr2's AES-GCM, as tenant data crosses the storage network. */
  [KEY_ORIGIN_RBD_MS_MODE] = CHOICE_KEY(origin_rbd_ms_mode, "secure|crc"),
  [KEY_ORIGIN_TLS_DIR] = STR_KEY(origin_tls_dir, K_OPT_PATH),
  [KEY_ORIGIN_TLS_PSK_FILE] = STR_KEY(origin_tls_psk_file, K_OPT_PATH),
  [KEY_ALLOCATION] = CHOICE_KEY(allocation, "rwss|fixed"),
  /* Up to 30 days: the paper's windows are 12 to 48 hours. */
  [KEY_ALLOCATION_WINDOW] = { "allocation_window", K_WINDOW,
                              offsetof(struct fc_config, allocation_window),
                              sizeof(unsigned), 1, FC_ALLOCATION_WINDOW_MAX_S, NULL, 0 },
  [KEY_ALLOCATION_WINDOW_MIN] = UINT_KEY(allocation_window_min, 1, FC_ALLOCATION_WINDOW_MAX_S),
  [KEY_ALLOCATION_WINDOW_MAX] = UINT_KEY(allocation_window_max, 1, FC_ALLOCATION_WINDOW_MAX_S),
  [KEY_ALLOCATION_SPARE] = CHOICE_KEY(allocation_spare, "proportional|idle"),
  [KEY_ALLOCATION_HEADROOM_PERCENT] = UINT_KEY(allocation_headroom_percent, 0, 100),
  [KEY_STAGING_FRACTION] = OTHER_KEY(staging_fraction, K_FRACTION),
  [KEY_RWS_PREDICTOR] = CHOICE_KEY(rws_predictor, "exp_self|exp|dexp|dexp_self|last"),
  [KEY_RWS_TRACKER] = CHOICE_KEY(rws_tracker, "sampled|exact"),
  [KEY_CLOUDCACHE_VARIANT] = CHOICE_KEY(cloudcache_variant, "bg_rws|bg_dirty|bg_ws|on_demand"),
  [KEY_CLOUDCACHE_ON_DEMAND_S] = UINT_KEY(cloudcache_on_demand_s, 1, 86400),
  [KEY_EXPORT_CLIENTS] = CHOICE_KEY(export_clients, "session|any"),
  [KEY_ORIGIN_BLOCK_DEVICES] = CHOICE_KEY(origin_block_devices, "any|prefixes"),
  /* 0: never, until the next start; up to an hour. */
  [KEY_ORIGIN_RETRY_MS] = UINT_KEY(origin_retry_ms, 0, 3600000),
  /* Up to an hour; at least 2 s for an origin, whose loop looks every
   * second, so that one slow reply is not taken for a dead server. */
  [KEY_ORIGIN_STALL_TIMEOUT_S] = UINT_KEY(origin_stall_timeout_s, 2, 3600),
  [KEY_EXPORT_SEND_TIMEOUT_S] = UINT_KEY(export_send_timeout_s, 1, 3600),
  [KEY_CONTROL_IDLE_TIMEOUT_S] = UINT_KEY(control_idle_timeout_s, 1, 3600),
  [KEY_METRICS_PATH] = STR_KEY(metrics_path, K_OPT_PATH),
  /* Up to 5 minutes: the shortest hit-ratio window is 5 minutes, and a
   * scrape of a file older than that says little. */
  [KEY_METRICS_INTERVAL] = UINT_KEY(metrics_interval, 1, 300),
};

struct parser {
  const char *file;
  unsigned line;
  struct fc_config *cfg;
  unsigned set_line[N_KEYS];    /* 0 = not set in the file */
  bool in_section;
  char *err;
  size_t errlen;
};

void fc_config_defaults(struct fc_config *cfg)
{
  memset(cfg, 0, sizeof *cfg);
  strcpy(cfg->control_socket, "/run/fcache/agent.sock");
  strcpy(cfg->state_dir, "/var/lib/fcache");
  strcpy(cfg->engine, "ucache");
  strcpy(cfg->cache_path, "/var/lib/fcache/cache.img");
  cfg->cache_size = 1ULL << 30;
  cfg->block_size = 4096;
  strcpy(cfg->migration_listen, "127.0.0.1:7440");
  cfg->migration_tls = FC_TLS_PINNED;
  strcpy(cfg->migration_tls_dir, "/etc/pki/qemu");
  strcpy(cfg->export_dir, "/run/fcache/exports");
  cfg->log_level = FC_LOG_INFO;
  cfg->log_target = FC_LOG_STDERR;
  cfg->nbd_threads = 8;
  cfg->origin_connections = 4;
  cfg->migration_preload_depth = 128;
  cfg->writeback_interval_ms = 1000;
  cfg->origin_retry_ms = 5000;
  cfg->dirty_high_percent = 50;
  strcpy(cfg->dm_prefix, "fcache");
  strcpy(cfg->allocation, "rwss");
  cfg->allocation_window = 3600;
  cfg->allocation_window_min = 600;
  cfg->allocation_window_max = 172800;
  strcpy(cfg->allocation_spare, "proportional");
  cfg->allocation_headroom_percent = 10;
  cfg->staging_fraction = 0.01;
  strcpy(cfg->rws_predictor, "exp_self");
  strcpy(cfg->rws_tracker, "sampled");
  strcpy(cfg->cloudcache_variant, "bg_rws");
  cfg->cloudcache_on_demand_s = 60;
  strcpy(cfg->export_clients, "session");
  strcpy(cfg->origin_block_devices, "any");
  (void)fc_parse_prefixes(FC_ORIGIN_PREFIXES_DEFAULT, cfg->origin_prefixes,
                          &cfg->n_origin_prefixes, NULL, 0);
  (void)fc_parse_prefixes(FC_ORIGIN_RBD_DIRS_DEFAULT, cfg->origin_rbd_dirs,
                          &cfg->n_origin_rbd_dirs, NULL, 0);
  strcpy(cfg->origin_rbd_ms_mode, "secure");
  cfg->origin_stall_timeout_s = 30;
  cfg->export_send_timeout_s = 30;
  cfg->control_idle_timeout_s = 30;
  cfg->metrics_interval = 15;
}

__attribute__((format(printf, 4, 5)))
static int fail(struct parser *p, unsigned line, const char *key,
                const char *fmt, ...)
{
  va_list ap;
  int n;

  if (key)
    n = snprintf(p->err, p->errlen, "%s:%u: key '%s': ", p->file, line, key);
  else
    n = snprintf(p->err, p->errlen, "%s:%u: ", p->file, line);
  if (n >= 0 && (size_t)n < p->errlen) {
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return -EINVAL;
}

static int check_hostport(const char *v)
{
  const char *colon = strrchr(v, ':');
  unsigned port;

  if (colon == NULL || colon == v)
    return -EINVAL;
  if (v[0] == '[' && colon[-1] != ']')          /* "[::1]:7440" */
    return -EINVAL;
  if (fc_parse_uint(colon + 1, &port) < 0 || port == 0 || port > 65535)
    return -EINVAL;
  return 0;
}

static int set_string(struct parser *p, const struct key_desc *k,
                      const char *v)
{
  size_t len = strlen(v);
  char *field = (char *)p->cfg + k->offset;
  size_t max = k->size - 1;

  if (k->type == K_SOCKET)   /* less the '~' of the name it is bound under */
    max = sizeof(((struct sockaddr_un *)0)->sun_path) - 2;
  if (len > max)
    return fail(p, p->line, k->name,
                "value is %zu bytes long; at most %zu allowed%s", len, max,
                k->type == K_SOCKET ? " (unix socket path limit)" : "");
  if ((k->type == K_PATH || k->type == K_SOCKET ||
       (k->type == K_OPT_PATH && v[0])) && v[0] != '/')
    return fail(p, p->line, k->name,
                "'%s' is not an absolute path; use a path starting with '/'",
                v);
  if (k->type == K_HOSTPORT && check_hostport(v) < 0)
    return fail(p, p->line, k->name,
                "'%s' is not host:port; use e.g. 127.0.0.1:7440 or "
                "[::1]:7440 with a port from 1 to 65535", v);
  if (k->type == K_ENGINE && strcmp(v, "ucache") != 0 &&
      strcmp(v, "dmcache") != 0)
    return fail(p, p->line, k->name,
                "unknown engine '%s'; allowed: ucache, dmcache", v);
  memcpy(field, v, len + 1);
  return 0;
}

/* Is v one of the '|'-separated names of list? */
static bool in_choices(const char *list, const char *v)
{
  size_t len = strlen(v);

  for (const char *c = list; *c;) {
    const char *bar = strchr(c, '|');
    size_t n = bar ? (size_t)(bar - c) : strlen(c);

    if (n == len && !strncmp(c, v, n))
      return true;
    c += n + (bar ? 1 : 0);
  }
  return false;
}

static int set_value(struct parser *p, const struct key_desc *k,
                     const char *v)
{
  void *field = (char *)p->cfg + k->offset;
  uint64_t size;
  unsigned u;
  int r;

  switch (k->type) {
  case K_STRING:
  case K_PATH:
  case K_OPT_PATH:
  case K_SOCKET:
  case K_HOSTPORT:
  case K_ENGINE:
    return set_string(p, k, v);
  case K_SIZE:
  case K_BLOCK_SIZE:
    r = fc_parse_size(v, &size);
    if (r == -ERANGE)
      return fail(p, p->line, k->name, "size '%s' is too large", v);
    if (r < 0)
      return fail(p, p->line, k->name,
                  "'%s' is not a size; use a byte count, optionally with "
                  "K, M, G or T (binary units), e.g. 4096, 64K, 10G", v);
    if (k->type == K_SIZE) {
      *(uint64_t *)field = size;
      return 0;
    }
    if (size < MIN_BLOCK_SIZE || size > MAX_BLOCK_SIZE ||
        (size & (size - 1)) != 0)
      return fail(p, p->line, k->name,
                  "'%s' is not allowed; use a power of two from 512 to "
                  "1048576 (1M)", v);
    *(uint32_t *)field = (uint32_t)size;
    return 0;
  case K_WINDOW:
    if (!strcmp(v, "auto")) {
      *(unsigned *)field = FC_ALLOCATION_WINDOW_AUTO;
      return 0;
    }
    r = fc_parse_uint(v, &u);
    if (r < 0 || u < k->min || u > k->max)
      return fail(p, p->line, k->name,
                  "'%s' is not allowed; use auto or an integer from %u to %u",
                  v, k->min, k->max);
    *(unsigned *)field = u;
    return 0;
  case K_UINT:
    r = fc_parse_uint(v, &u);
    if (r < 0 || u < k->min || u > k->max)
      return fail(p, p->line, k->name,
                  "'%s' is not allowed; use an integer from %u to %u",
                  v, k->min, k->max);
    *(unsigned *)field = u;
    return 0;
  case K_LEVEL:
    if (fc_log_level_parse(v, field) < 0)
      return fail(p, p->line, k->name,
                  "unknown level '%s'; allowed: error, warning, info, debug",
                  v);
    return 0;
  case K_TARGET:
    if (fc_log_target_parse(v, field) < 0)
      return fail(p, p->line, k->name,
                  "unknown target '%s'; allowed: stderr, syslog", v);
    return 0;
  case K_PREFIXES: {
    char why[FC_PATH_MAX + 96];

    if (fc_parse_prefixes(v, field,
                          (unsigned *)((char *)p->cfg + k->count_offset),
                          why, sizeof why) < 0)
      return fail(p, p->line, k->name,
                  "%s; use comma-separated absolute paths (a directory "
                  "ends with '/'), e.g. %s", why, k->choices);
    return 0;
  }
  case K_CHOICE:
    if (!in_choices(k->choices, v) || strlen(v) >= k->size)
      return fail(p, p->line, k->name, "unknown value '%s'; allowed: %s", v,
                  k->choices);
    memcpy(field, v, strlen(v) + 1);
    return 0;
  case K_FRACTION: {
    char *end;
    double d;

    errno = 0;
    d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= STAGING_FRACTION_MIN) ||
        !(d <= STAGING_FRACTION_MAX))
      return fail(p, p->line, k->name,
                  "'%s' is not allowed; use a fraction from %g to %g "
                  "(0.1 %% to 1 %% of a volume's cache share)", v,
                  STAGING_FRACTION_MIN, STAGING_FRACTION_MAX);
    *(double *)field = d;
    return 0;
  }
  case K_TLS:
    if (!strcmp(v, "pinned"))
      *(enum fc_migration_tls *)field = FC_TLS_PINNED;
    else if (!strcmp(v, "psk"))
      *(enum fc_migration_tls *)field = FC_TLS_PSK;
    else if (!strcmp(v, "x509"))
      *(enum fc_migration_tls *)field = FC_TLS_X509;
    else if (!strcmp(v, "none"))
      *(enum fc_migration_tls *)field = FC_TLS_NONE;
    else
      return fail(p, p->line, k->name,
                  "unknown mode '%s'; allowed: pinned (the default: a key "
                  "pair of each agent for each migration, pinned by its "
                  "fingerprint), psk (a key from each migration's token; "
                  "weaker), x509 (host certificates in migration_tls_dir), "
                  "none (plaintext)", v);
    return 0;
  }
  return -EINVAL;
}

static char *trim(char *s)
{
  char *end;

  while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n' ||
         *s == '\f' || *s == '\v')
    s++;
  end = s + strlen(s);
  while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
                     end[-1] == '\n' || end[-1] == '\f' || end[-1] == '\v'))
    end--;
  *end = '\0';
  return s;
}

/* Cuts a trailing comment: '#' or ';' at the start or after whitespace. */
static void strip_comment(char *s)
{
  for (char *c = s; *c; c++) {
    if ((*c == '#' || *c == ';') &&
        (c == s || c[-1] == ' ' || c[-1] == '\t')) {
      *c = '\0';
      return;
    }
  }
}

static int parse_section(struct parser *p, char *s)
{
  char *close = strchr(s, ']');
  char *name;

  if (close == NULL)
    return fail(p, p->line, NULL, "section header '%s' lacks ']'", s);
  strip_comment(close + 1);
  if (*trim(close + 1) != '\0')
    return fail(p, p->line, NULL,
                "unexpected text after section header '%s'", s);
  *close = '\0';
  name = trim(s + 1);
  if (strcasecmp(name, "agent") != 0 && strcmp(name, "DEFAULT") != 0)
    return fail(p, p->line, NULL,
                "unknown section '[%s]'; allowed: [agent], [DEFAULT]", name);
  p->in_section = true;
  return 0;
}

static void append_key_list(char *buf, size_t size)
{
  size_t len = strlen(buf);

  for (size_t i = 0; i < N_KEYS && len < size; i++) {
    int n = snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
                     keys[i].name);
    if (n < 0)
      return;
    len += (size_t)n;
  }
}

static int parse_line(struct parser *p, char *raw)
{
  char *s = trim(raw);
  char *eq, *key, *value;
  const struct key_desc *k = NULL;
  size_t i;

  if (*s == '\0' || *s == '#' || *s == ';')
    return 0;
  if (*s == '[')
    return parse_section(p, s);

  eq = strchr(s, '=');
  if (eq == NULL)
    return fail(p, p->line, NULL,
                "expected 'key = value', '[section]' or a comment; got '%s'",
                s);
  *eq = '\0';
  key = trim(s);
  value = eq + 1;
  strip_comment(value);
  value = trim(value);
  if (*key == '\0')
    return fail(p, p->line, NULL, "missing key name before '='");

  for (i = 0; i < N_KEYS; i++) {
    if (strcmp(key, keys[i].name) == 0) {
      k = &keys[i];
      break;
    }
  }
  if (k == NULL) {
    int r = fail(p, p->line, key, "unknown key; known keys: ");
    append_key_list(p->err, p->errlen);
    return r;
  }
  if (!p->in_section)
    return fail(p, p->line, key,
                "key outside any section; put it under [agent]");
  if (p->set_line[i] != 0)
    return fail(p, p->line, key,
                "already set on line %u; each key may appear only once",
                p->set_line[i]);
  p->set_line[i] = p->line;
  return set_value(p, k, value);
}

/* Checks that involve several keys, run once the whole file is read so
 * that the order of lines does not matter. */
static int check_config(struct parser *p)
{
  struct fc_config *cfg = p->cfg;
  unsigned line = p->set_line[KEY_CACHE_SIZE];
  const char *dir = cfg->state_dir;

  if (line == 0)
    line = p->set_line[KEY_BLOCK_SIZE];
  if (cfg->cache_size < cfg->block_size)
    return fail(p, line, "cache_size",
                "%llu bytes is less than one block of block_size %u",
                (unsigned long long)cfg->cache_size, cfg->block_size);
  if (cfg->cache_size % cfg->block_size != 0)
    return fail(p, line, "cache_size",
                "%llu bytes is not a multiple of block_size %u",
                (unsigned long long)cfg->cache_size, cfg->block_size);
  if (cfg->cache_size / cfg->block_size > MAX_CACHE_BLOCKS)
    return fail(p, line, "cache_size",
                "%llu bytes is more than %llu blocks of block_size %u; "
                "use a larger block_size",
                (unsigned long long)cfg->cache_size,
                (unsigned long long)MAX_CACHE_BLOCKS, cfg->block_size);

  if (cfg->allocation_window_min > cfg->allocation_window_max)
    return fail(p, p->set_line[KEY_ALLOCATION_WINDOW_MIN] ?
                     p->set_line[KEY_ALLOCATION_WINDOW_MIN] :
                     p->set_line[KEY_ALLOCATION_WINDOW_MAX],
                "allocation_window_min",
                "%u is above allocation_window_max %u; the automatic window "
                "is chosen between them", cfg->allocation_window_min,
                cfg->allocation_window_max);

  /* dm_prefix names device-mapper devices: keep it to a safe alphabet. */
  if (!cfg->dm_prefix[0] ||
      strspn(cfg->dm_prefix, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             "0123456789_") != strlen(cfg->dm_prefix))
    return fail(p, p->set_line[KEY_DM_PREFIX], "dm_prefix",
                "'%s' may hold only letters, digits and '_'", cfg->dm_prefix);

  /* Admins connect through the same socket, whose group is control_group:
   * with no control_group the socket is root's alone and an admin group
   * could never be used. */
  if (cfg->control_admin_group[0] && !cfg->control_group[0])
    return fail(p, p->set_line[KEY_CONTROL_ADMIN_GROUP], "control_admin_group",
                "'%s' is set but control_group is empty (socket mode 0600, "
                "root only); set control_group to a group every admin is "
                "in as well (it may be the same group)",
                cfg->control_admin_group);

  /* node-exporter's textfile collector reads only *.prom files; a path
   * that would not mean what it says once resolved is refused as for
   * origins. */
  if (cfg->metrics_path[0]) {
    size_t n = strlen(cfg->metrics_path);

    if (n < 6 || strcmp(cfg->metrics_path + n - 5, ".prom") != 0 ||
        cfg->metrics_path[n - 6] == '/')
      return fail(p, p->set_line[KEY_METRICS_PATH], "metrics_path",
                  "'%s' does not end in a file name with '.prom', the only "
                  "files node-exporter's textfile collector reads",
                  cfg->metrics_path);
    if (fc_path_has_dot_component(cfg->metrics_path))
      return fail(p, p->set_line[KEY_METRICS_PATH], "metrics_path",
                  "'%s' has a '.' or '..' component; give the path itself",
                  cfg->metrics_path);
  }

  /* The default cache file lives in state_dir, whatever the file says. */
  if (p->set_line[KEY_CACHE_PATH] == 0) {
    size_t dlen = strlen(dir);
    const char *sep = dlen > 0 && dir[dlen - 1] == '/' ? "" : "/";
    int n = snprintf(cfg->cache_path, sizeof cfg->cache_path,
                     "%s%scache.img", dir, sep);
    if (n < 0 || (size_t)n >= sizeof cfg->cache_path)
      return fail(p, p->set_line[KEY_STATE_DIR], "state_dir",
                  "too long to derive the default cache_path "
                  "(<state_dir>/cache.img exceeds %zu bytes); "
                  "set cache_path explicitly", sizeof cfg->cache_path - 1);
  }
  return 0;
}

/* The file is applied over fresh defaults into a scratch copy, so a
 * failed load leaves *cfg untouched. */
int fc_config_load(const char *path, struct fc_config *cfg,
                   char *err, size_t errlen)
{
  struct fc_config tmp;
  struct parser p = { .file = path, .cfg = &tmp, .err = err,
                      .errlen = errlen };
  FILE *f;
  char *buf = NULL;
  size_t cap = 0;
  ssize_t n;
  int r = 0;

  if (errlen > 0)
    err[0] = '\0';
  fc_config_defaults(&tmp);
  f = fopen(path, "re");
  if (f == NULL) {
    r = -errno;
    snprintf(err, errlen, "%s: cannot open configuration file: %s", path,
             strerror(-r));
    return r;
  }
  while ((n = getline(&buf, &cap, f)) >= 0) {
    char *line = buf;
    p.line++;
    if ((size_t)n > LINE_MAX_LEN) {
      r = fail(&p, p.line, NULL, "line longer than %d bytes", LINE_MAX_LEN);
      goto out;
    }
    if (strlen(buf) != (size_t)n) {
      r = fail(&p, p.line, NULL, "line contains a NUL byte");
      goto out;
    }
    if (p.line == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0)
      line += 3;                        /* UTF-8 BOM from Windows editors */
    r = parse_line(&p, line);
    if (r < 0)
      goto out;
  }
  if (ferror(f)) {
    r = errno ? -errno : -EIO;
    snprintf(err, errlen, "%s: cannot read configuration file: %s", path,
             strerror(-r));
    goto out;
  }
  r = check_config(&p);
  if (r < 0)
    goto out;
  *cfg = tmp;
out:
  free(buf);
  fclose(f);
  return r;
}
