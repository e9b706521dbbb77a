/* SPDX-License-Identifier: Apache-2.0 */
/* Persistent cache metadata: creating the file, records and their CRCs,
 * the clean/running shutdown state, geometry changes, and every way a file
 * can be unusable (bad magic, bad header checksum, truncation). */
#include "testutil.h"

#include <fcntl.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "ucache/metadata.h"

#define BS 4096u
#define NB 100u

/* The on-disk header as metadata.h describes it (little-endian hosts). */
struct disk_header {
  char magic[8];
  uint32_t version;
  uint32_t block_size;
  uint32_t nr_blocks;
  uint32_t state;
  uint32_t record_size;
  uint32_t crc;
};

struct fx {
  char dir[256];
  char path[512];
  char err[512];
};

static int
setup(void **state)
{
  struct fx *f = calloc(1, sizeof *f);

  assert_non_null(f);
  tu_mkdtemp(f->dir, sizeof f->dir);
  tu_path(f->path, sizeof f->path, f->dir, "cache.meta");
  *state = f;
  return 0;
}

static int
teardown(void **state)
{
  struct fx *f = *state;

  tu_rmrf(f->dir);
  free(f);
  return 0;
}

static struct fc_metadata *
open_ok(struct fx *f, uint32_t bs, uint32_t nb, bool *was_clean)
{
  struct fc_metadata *md = NULL;

  f->err[0] = 0;
  assert_int_equal(fc_md_open(f->path, bs, nb, was_clean, &md, f->err, sizeof f->err), 0);
  assert_non_null(md);
  return md;
}

/* Opening must fail with `want`, hand back nothing, and explain in err. */
static void
open_fails(struct fx *f, int want, const char *needle)
{
  struct fc_metadata *md = NULL;
  bool was_clean = true;

  f->err[0] = 0;
  assert_int_equal(fc_md_open(f->path, BS, NB, &was_clean, &md, f->err, sizeof f->err),
                   want);
  assert_null(md);
  assert_non_null(strstr(f->err, f->path));
  assert_non_null(strstr(f->err, needle));
}

static void
read_header(struct fx *f, struct disk_header *h)
{
  tu_read_file(f->path, h, sizeof *h, 0);
}

static void
patch_file(const char *path, off_t off, const void *data, size_t len)
{
  int fd = open(path, O_RDWR);

  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, data, len, off), (ssize_t)len);
  close(fd);
}

static void
test_new_file_is_clean_and_empty(void **state)
{
  struct fx *f = *state;
  struct fc_md_record recs[NB];
  struct disk_header h;
  struct stat st;
  bool was_clean = false;
  struct fc_metadata *md = open_ok(f, BS, NB, &was_clean);

  assert_true(was_clean);
  assert_int_equal(md->block_size, BS);
  assert_int_equal(md->nr_blocks, NB);
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_size, FC_MD_HEADER_SIZE + NB * sizeof(struct fc_md_record));
  assert_int_equal(st.st_mode & 0777, 0600);
  read_header(f, &h);
  assert_memory_equal(h.magic, FC_MD_MAGIC, 8);
  assert_int_equal(h.version, FC_MD_VERSION);
  assert_int_equal(h.block_size, BS);
  assert_int_equal(h.nr_blocks, NB);
  assert_int_equal(h.state, FC_MD_STATE_CLEAN);
  assert_int_equal(h.record_size, sizeof(struct fc_md_record));
  assert_int_equal(h.crc, crc32c(0, &h, offsetof(struct disk_header, crc)));

  assert_int_equal(fc_md_read(md, 0, NB, recs), 0);
  for (uint32_t i = 0; i < NB; i++) {
    assert_int_equal(recs[i].flags, 0);
    assert_true(fc_md_record_ok(&recs[i]));
  }
  fc_md_close(md);
}

static void
test_set_and_read_record(void **state)
{
  struct fx *f = *state;
  struct fc_md_record rec, recs[3];
  bool was_clean;
  struct fc_metadata *md = open_ok(f, BS, NB, &was_clean);

  assert_int_equal(fc_md_set(md, to_cblock(7), 123456789012ull, 0xfeedfacecafeull,
                             FC_MD_VALID | FC_MD_DIRTY), 0);
  assert_int_equal(fc_md_read(md, 7, 1, &rec), 0);
  assert_int_equal(rec.oblock, 123456789012ull);
  assert_int_equal(rec.volume_tag, 0xfeedfacecafeull);
  assert_int_equal(rec.flags, FC_MD_VALID | FC_MD_DIRTY);
  assert_int_equal(rec.lru_rank, 0);
  assert_int_equal(rec.crc, crc32c(0, &rec, offsetof(struct fc_md_record, crc)));
  assert_true(fc_md_record_ok(&rec));

  /* Neighbours untouched. */
  assert_int_equal(fc_md_read(md, 6, 3, recs), 0);
  assert_int_equal(recs[0].flags, 0);
  assert_int_equal(recs[1].oblock, 123456789012ull);
  assert_int_equal(recs[2].flags, 0);

  /* Where it is in the file: header, then 32 bytes per block. */
  tu_read_file(f->path, &rec, sizeof rec, FC_MD_HEADER_SIZE + 7 * 32);
  assert_int_equal(rec.oblock, 123456789012ull);

  /* Rewritten clean, then cleared: flags 0 writes an all-zero record. */
  assert_int_equal(fc_md_set(md, to_cblock(7), 5, 9, FC_MD_VALID), 0);
  assert_int_equal(fc_md_read(md, 7, 1, &rec), 0);
  assert_int_equal(rec.flags, FC_MD_VALID);
  assert_int_equal(rec.oblock, 5);
  assert_true(fc_md_record_ok(&rec));
  assert_int_equal(fc_md_set(md, to_cblock(7), 5, 9, 0), 0);
  assert_int_equal(fc_md_read(md, 7, 1, &rec), 0);
  {
    static const struct fc_md_record zero;
    assert_memory_equal(&rec, &zero, sizeof rec);
  }
  assert_int_equal(fc_md_sync(md), 0);
  fc_md_close(md);
}

static void
test_out_of_range(void **state)
{
  struct fx *f = *state;
  struct fc_md_record recs[2];
  bool was_clean;
  struct fc_metadata *md = open_ok(f, BS, NB, &was_clean);

  assert_int_equal(fc_md_set(md, to_cblock(NB), 1, 1, FC_MD_VALID), -ERANGE);
  assert_int_equal(fc_md_set(md, to_cblock(CBLOCK_NONE), 1, 1, FC_MD_VALID), -ERANGE);
  assert_int_equal(fc_md_read(md, NB - 1, 2, recs), -ERANGE);
  assert_int_equal(fc_md_read(md, NB + 1, 0, recs), -ERANGE);
  assert_int_equal(fc_md_read(md, 1, UINT32_MAX, recs), -ERANGE);
  assert_int_equal(fc_md_read(md, NB - 1, 1, recs), 0);
  assert_int_equal(fc_md_set(md, to_cblock(NB - 1), 1, 1, FC_MD_VALID), 0);
  fc_md_close(md);
}

static void
test_record_ok(void **state)
{
  struct fx *f = *state;
  struct fc_md_record rec, bad;
  static const struct fc_md_record zero;
  bool was_clean;
  struct fc_metadata *md = open_ok(f, BS, NB, &was_clean);

  assert_true(fc_md_record_ok(&zero));
  assert_int_equal(fc_md_set(md, to_cblock(1), 42, 77, FC_MD_VALID | FC_MD_DIRTY), 0);
  assert_int_equal(fc_md_read(md, 1, 1, &rec), 0);
  assert_true(fc_md_record_ok(&rec));

  bad = rec;
  bad.oblock ^= 1;                      /* one bit of the payload */
  assert_false(fc_md_record_ok(&bad));
  bad = rec;
  bad.flags &= ~FC_MD_DIRTY;            /* a lost dirty bit must show */
  assert_false(fc_md_record_ok(&bad));
  bad = rec;
  bad.crc ^= 0x80000000u;               /* the checksum itself */
  assert_false(fc_md_record_ok(&bad));
  bad = zero;
  bad.lru_rank = 3;                     /* not all zero, no checksum */
  assert_false(fc_md_record_ok(&bad));

  /* Corruption on disk is seen through fc_md_read. */
  patch_file(f->path, FC_MD_HEADER_SIZE + 32 + 3, "\x55", 1);
  assert_int_equal(fc_md_read(md, 1, 1, &rec), 0);
  assert_false(fc_md_record_ok(&rec));
  fc_md_close(md);
}

static void
test_running_then_reopen_not_clean(void **state)
{
  struct fx *f = *state;
  struct fc_md_record rec;
  struct disk_header h;
  bool was_clean = false;
  struct fc_metadata *md = open_ok(f, BS, NB, &was_clean);

  assert_true(was_clean);
  assert_int_equal(fc_md_set(md, to_cblock(3), 30, 1, FC_MD_VALID | FC_MD_DIRTY), 0);
  assert_int_equal(fc_md_set_state(md, FC_MD_STATE_RUNNING), 0);
  read_header(f, &h);
  assert_int_equal(h.state, FC_MD_STATE_RUNNING);
  assert_int_equal(h.crc, crc32c(0, &h, offsetof(struct disk_header, crc)));
  fc_md_close(md);          /* a crash: no CLEAN state written */

  md = open_ok(f, BS, NB, &was_clean);
  assert_false(was_clean);
  assert_int_equal(fc_md_read(md, 3, 1, &rec), 0);
  assert_int_equal(rec.oblock, 30);
  assert_true(rec.flags & FC_MD_DIRTY);
  assert_int_equal(fc_md_set_state(md, FC_MD_STATE_CLEAN), 0);
  fc_md_close(md);

  md = open_ok(f, BS, NB, &was_clean);
  assert_true(was_clean);
  fc_md_close(md);
}

static void
test_geometry_mismatch(void **state)
{
  struct fx *f = *state;
  struct fc_metadata *md = NULL;
  struct fc_md_record rec;
  struct stat st;
  bool was_clean = false;

  md = open_ok(f, BS, NB, &was_clean);
  assert_int_equal(fc_md_set(md, to_cblock(4), 40, 1, FC_MD_VALID), 0);
  fc_md_close(md);

  /* Other block count: refused, but the old file is handed back with
   * its own geometry so the caller can look at the old records. */
  md = NULL;
  f->err[0] = 0;
  assert_int_equal(fc_md_open(f->path, BS, NB * 2, &was_clean, &md, f->err,
                              sizeof f->err), -EMEDIUMTYPE);
  assert_non_null(md);
  assert_true(was_clean);
  assert_int_equal(md->nr_blocks, NB);
  assert_int_equal(md->block_size, BS);
  assert_non_null(strstr(f->err, f->path));
  assert_non_null(strstr(f->err, "100 blocks of 4096 bytes"));
  assert_non_null(strstr(f->err, "200 blocks of 4096 bytes"));
  assert_int_equal(fc_md_read(md, 4, 1, &rec), 0);
  assert_int_equal(rec.oblock, 40);

  /* The caller decides to start over with the new geometry. */
  assert_int_equal(fc_md_reinit(md, BS, NB * 2), 0);
  fc_md_close(md);
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_size, FC_MD_HEADER_SIZE + 2 * NB * sizeof(struct fc_md_record));
  md = open_ok(f, BS, NB * 2, &was_clean);
  assert_true(was_clean);
  assert_int_equal(fc_md_read(md, 4, 1, &rec), 0);
  assert_int_equal(rec.flags, 0);
  fc_md_close(md);

  /* Other block size. */
  md = NULL;
  assert_int_equal(fc_md_open(f->path, 2 * BS, NB * 2, &was_clean, &md, f->err,
                              sizeof f->err), -EMEDIUMTYPE);
  assert_non_null(md);
  assert_non_null(strstr(f->err, "200 blocks of 8192 bytes"));
  fc_md_close(md);
}

static void
test_bad_magic(void **state)
{
  struct fx *f = *state;
  bool was_clean;

  fc_md_close(open_ok(f, BS, NB, &was_clean));
  patch_file(f->path, 0, "XCACHEMD", 8);
  open_fails(f, -EBADMSG, "not fcache metadata");
}

static void
test_foreign_file(void **state)
{
  struct fx *f = *state;
  char junk[8192];
  uint64_t seed = 99;

  tu_fill(junk, sizeof junk, &seed);
  tu_write_file(f->path, junk, sizeof junk);
  open_fails(f, -EBADMSG, "not fcache metadata");
}

static void
test_bad_header_crc(void **state)
{
  struct fx *f = *state;
  struct disk_header h;
  bool was_clean;

  fc_md_close(open_ok(f, BS, NB, &was_clean));
  read_header(f, &h);
  h.state = FC_MD_STATE_RUNNING;        /* changed without resealing */
  patch_file(f->path, 0, &h, sizeof h);
  open_fails(f, -EBADMSG, "checksum");
}

static void
test_bad_version(void **state)
{
  struct fx *f = *state;
  struct disk_header h;
  bool was_clean;

  fc_md_close(open_ok(f, BS, NB, &was_clean));
  read_header(f, &h);
  h.version = FC_MD_VERSION + 1;
  h.crc = crc32c(0, &h, offsetof(struct disk_header, crc));
  patch_file(f->path, 0, &h, sizeof h);
  open_fails(f, -EBADMSG, "version");
}

static void
test_write_all(void **state)
{
  struct fx *f = *state;
  struct fc_md_record *recs = calloc(NB, sizeof *recs);
  struct fc_md_record *back = calloc(NB, sizeof *back);
  bool was_clean;
  struct fc_metadata *md = open_ok(f, BS, NB, &was_clean);

  assert_non_null(recs);
  assert_non_null(back);
  /* Stale records on disk must all be replaced. */
  assert_int_equal(fc_md_set(md, to_cblock(50), 1, 1, FC_MD_VALID | FC_MD_DIRTY), 0);
  for (uint32_t i = 0; i < NB; i += 3) {
    recs[i].oblock = 1000 + i;
    recs[i].volume_tag = 0xabcdef;
    recs[i].flags = FC_MD_VALID | (i % 2 ? FC_MD_DIRTY : 0);
    recs[i].lru_rank = NB - i;
  }
  assert_int_equal(fc_md_write_all(md, recs), 0);
  assert_int_equal(fc_md_read(md, 0, NB, back), 0);
  assert_memory_equal(back, recs, NB * sizeof *recs);   /* sealed in place too */
  for (uint32_t i = 0; i < NB; i++) {
    assert_true(fc_md_record_ok(&back[i]));
    if (i % 3 == 0) {
      assert_int_equal(back[i].oblock, 1000 + i);
      assert_int_equal(back[i].lru_rank, NB - i);
      assert_int_not_equal(back[i].crc, 0);
    } else {
      assert_int_equal(back[i].flags, 0);
    }
  }
  fc_md_close(md);
  free(recs);
  free(back);
}

/* A volume leaving clears its records in runs: exactly the listed ones,
 * the neighbours of each run untouched; a list that does not ascend, or
 * names a block past the end, writes nothing. */
static void
test_forget_many(void **state)
{
  struct fx *f = *state;
  const cblock_t gone[] = { { 3 }, { 4 }, { 5 }, { 9 }, { 20 }, { 21 } };
  const cblock_t unsorted[] = { { 30 }, { 29 } }, past[] = { { 31 }, { NB } };
  struct fc_md_record back[NB];
  bool was_clean;
  struct fc_metadata *md = open_ok(f, BS, NB, &was_clean);

  for (uint32_t i = 0; i < 40; i++)
    assert_int_equal(fc_md_set(md, to_cblock(i), 100 + i, 7, FC_MD_VALID), 0);
  assert_int_equal(fc_md_forget_many(md, gone, 6), 0);
  assert_int_equal(fc_md_forget_many(md, unsorted, 2), -ERANGE);
  assert_int_equal(fc_md_forget_many(md, past, 2), -ERANGE);
  assert_int_equal(fc_md_forget_many(md, gone, 0), 0);
  assert_int_equal(fc_md_read(md, 0, NB, back), 0);
  for (uint32_t i = 0; i < 40; i++) {
    bool cleared = false;

    for (size_t k = 0; k < sizeof gone / sizeof gone[0]; k++)
      cleared |= gone[k].n == i;
    assert_true(fc_md_record_ok(&back[i]));
    assert_int_equal(back[i].flags, cleared ? 0 : FC_MD_VALID);
    if (!cleared)
      assert_int_equal(back[i].oblock, 100 + i);
  }
  fc_md_close(md);
}

static void
test_truncated_records(void **state)
{
  struct fx *f = *state;
  bool was_clean;

  fc_md_close(open_ok(f, BS, NB, &was_clean));
  assert_int_equal(truncate(f->path, FC_MD_HEADER_SIZE + (NB - 1) * 32), 0);
  open_fails(f, -EBADMSG, "truncated");
}

static void
test_truncated_header(void **state)
{
  struct fx *f = *state;
  struct fc_metadata *md = NULL;
  bool was_clean;

  fc_md_close(open_ok(f, BS, NB, &was_clean));
  assert_int_equal(truncate(f->path, 10), 0);
  f->err[0] = 0;
  assert_true(fc_md_open(f->path, BS, NB, &was_clean, &md, f->err, sizeof f->err) < 0);
  assert_null(md);
  assert_non_null(strstr(f->err, f->path));
}

static void
test_open_nonexistent_dir(void **state)
{
  struct fx *f = *state;
  struct fc_metadata *md = NULL;
  bool was_clean;

  tu_path(f->path, sizeof f->path, f->dir, "missing/cache.meta");
  assert_int_equal(fc_md_open(f->path, BS, NB, &was_clean, &md, f->err, sizeof f->err),
                   -ENOENT);
  assert_null(md);
  assert_non_null(strstr(f->err, f->path));
  tu_path(f->path, sizeof f->path, f->dir, "cache.meta");
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(test_new_file_is_clean_and_empty),
    T(test_set_and_read_record),
    T(test_out_of_range),
    T(test_record_ok),
    T(test_running_then_reopen_not_clean),
    T(test_geometry_mismatch),
    T(test_bad_magic),
    T(test_foreign_file),
    T(test_bad_header_crc),
    T(test_bad_version),
    T(test_write_all),
    T(test_forget_many),
    T(test_truncated_records),
    T(test_truncated_header),
    T(test_open_nonexistent_dir),
  };
#undef T

  fc_log_setup(FC_LOG_STDERR, FC_LOG_ERROR);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
