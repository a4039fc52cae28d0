/* hs_cdsprpc.c - hostsim's libcdsprpc.so: rpcmem allocations backed by memfd_create + mmap,
 * so rpcmem_to_fd returns a real file descriptor that libQnnHtp (hostsim) can map. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct alloc {
  void *p;
  size_t size;
  int fd;
  struct alloc *next;
} alloc;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static alloc *g_list;
static int64_t g_live, g_bytes;

EXPORT void rpcmem_init(void) {}
EXPORT void rpcmem_deinit(void) {}

EXPORT void *rpcmem_alloc2(int heapid, uint32_t flags, size_t size) {
  (void)heapid;
  (void)flags;
  if (size == 0) return NULL;
  int fd = memfd_create("rpcmem", MFD_CLOEXEC);
  if (fd < 0) return NULL;
  if (ftruncate(fd, (off_t)size) != 0) { close(fd); return NULL; }
  /* Populated, as an ION/DMA-BUF allocation is mapped whole when it is mmapped: the host's first
   * touches of it are not page faults the device would not have. */
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) { close(fd); return NULL; }
  alloc *a = malloc(sizeof *a);
  if (!a) { munmap(p, size); close(fd); return NULL; }
  *a = (alloc){p, size, fd, NULL};
  pthread_mutex_lock(&g_mu);
  a->next = g_list;
  g_list = a;
  g_live++;
  g_bytes += (int64_t)size;
  pthread_mutex_unlock(&g_mu);
  return p;
}

EXPORT void *rpcmem_alloc(int heapid, uint32_t flags, int size) {
  if (size <= 0) return NULL;
  return rpcmem_alloc2(heapid, flags, (size_t)size);
}

EXPORT void rpcmem_free(void *p) {
  pthread_mutex_lock(&g_mu);
  alloc **pp = &g_list;
  while (*pp && (*pp)->p != p) pp = &(*pp)->next;
  alloc *a = *pp;
  if (a) {
    *pp = a->next;
    g_live--;
    g_bytes -= (int64_t)a->size;
  }
  pthread_mutex_unlock(&g_mu);
  if (!a) return;
  munmap(a->p, a->size);
  close(a->fd);
  free(a);
}

/* rpcmem_to_fd returns the fd of the allocation containing p, or -1. */
EXPORT int rpcmem_to_fd(void *p) {
  int fd = -1;
  pthread_mutex_lock(&g_mu);
  for (alloc *a = g_list; a; a = a->next)
    if ((uint8_t *)p >= (uint8_t *)a->p && (uint8_t *)p < (uint8_t *)a->p + a->size) { fd = a->fd; break; }
  pthread_mutex_unlock(&g_mu);
  return fd;
}

EXPORT int64_t hostsim_rpcmem_live(void) {
  pthread_mutex_lock(&g_mu);
  int64_t n = g_live;
  pthread_mutex_unlock(&g_mu);
  return n;
}
EXPORT int64_t hostsim_rpcmem_bytes(void) {
  pthread_mutex_lock(&g_mu);
  int64_t n = g_bytes;
  pthread_mutex_unlock(&g_mu);
  return n;
}
