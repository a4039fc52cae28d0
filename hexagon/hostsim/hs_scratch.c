/* hs_scratch.c - see hs_scratch.h. The stack is one block; what does not fit goes to overflow
 * chunks (plain malloc), and when the outermost run releases, the block grows to the run's peak
 * so that the next run of that size allocates nothing. */
#include "hs_scratch.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64
#define MAX_OVERFLOW 1024
#define GROW_STEP ((size_t)2 << 20)

static struct {
  char *block;
  size_t cap, top, peak;   /* peak: the most a run needed (block use plus overflow) */
  size_t over_bytes;        /* overflow allocated since the outermost mark */
  int depth;                /* marks not yet released */
  void *over[MAX_OVERFLOW]; /* overflow chunks, freed by the outermost release */
  int nover;
} s;

size_t hs_scratch_mark(void) {
  s.depth++;
  return s.top;
}

void *hs_scratch_alloc(size_t bytes) {
  size_t n = (bytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  if (n == 0) n = ALIGN;
  void *p;
  if (s.top + n <= s.cap) {
    p = s.block + s.top;
    s.top += n;
  } else {
    if (s.nover == MAX_OVERFLOW || !(p = aligned_alloc(ALIGN, n))) return NULL;
    s.over[s.nover++] = p;
    s.over_bytes += n;
  }
  if (s.top + s.over_bytes > s.peak) s.peak = s.top + s.over_bytes;
  return p;
}

void *hs_scratch_calloc(size_t n, size_t size) {
  if (size && n > (size_t)-1 / size) return NULL;
  void *p = hs_scratch_alloc(n * size);
  if (p) memset(p, 0, n * size);
  return p;
}

void hs_scratch_release(size_t mark) {
  s.top = mark;
  if (--s.depth > 0) return;
  /* The outermost run is done: drop its overflow and make the block hold its peak. */
  for (int i = 0; i < s.nover; i++) free(s.over[i]);
  s.nover = 0;
  s.over_bytes = 0;
  if (s.peak > s.cap) { /* by half again at least: a context that grows by a row a call must not regrow each call */
    size_t want = s.peak > s.cap + s.cap / 2 ? s.peak : s.cap + s.cap / 2;
    want = (want + GROW_STEP - 1) & ~(GROW_STEP - 1);
    free(s.block);
    s.block = aligned_alloc(ALIGN, want);
    s.cap = s.block ? want : 0;
  }
  s.top = 0;
}

void hs_scratch_reserve(size_t bytes) {
  if (s.depth > 0 || bytes <= s.cap) return;
  size_t want = (bytes + GROW_STEP - 1) & ~(GROW_STEP - 1);
  char *b = aligned_alloc(ALIGN, want);
  if (!b) return; /* the runs grow it as before */
  memset(b, 0, want);
  free(s.block);
  s.block = b;
  s.cap = want;
  if (want > s.peak) s.peak = want;
}

void hs_scratch_free(void) {
  for (int i = 0; i < s.nover; i++) free(s.over[i]);
  free(s.block);
  memset(&s, 0, sizeof s);
}
