/* hs_scratch.h - the working memory of graph executions, kept from one call to the next.
 *
 * An NPU graph has its working memory (VTCM, spill-fill) for its context's life. hostsim used to
 * allocate a call's buffers (a whole context's past K/V in float, up to hundreds of MB) and free
 * them again on every call: the pages were faulted in each time and unmapped after, and every
 * unmap sends a TLB-shootdown interrupt to each core running the process, so the host thread that
 * called the graph paid for hostsim's memory churn after the call had returned. Executions are
 * serialised (graphExecute's lock), so one stack serves them all: a run takes a mark, allocates,
 * and releases to its mark; the memory stays mapped at its peak until hs_scratch_free. */
#ifndef HS_SCRATCH_H
#define HS_SCRATCH_H

#include <stddef.h>

/* hs_scratch_mark opens a scope: what is allocated until hs_scratch_release(mark) is freed then
 * (scopes nest; overflow chunks are freed when the outermost scope closes). */
size_t hs_scratch_mark(void);
/* hs_scratch_alloc is malloc from the stack (64-byte aligned; NULL without memory). */
void *hs_scratch_alloc(size_t bytes);
/* hs_scratch_calloc is calloc from the stack. */
void *hs_scratch_calloc(size_t n, size_t size);
/* hs_scratch_release closes the scope of mark. */
void hs_scratch_release(size_t mark);
/* hs_scratch_reserve grows the stack to at least bytes and faults its pages in now (outside any
 * run), as an NPU context has its working memory from its creation: a graph's first calls then
 * cost what its later ones do, and a runner's first measurements of them are not priced cold. */
void hs_scratch_reserve(size_t bytes);
/* hs_scratch_free unmaps the stack (no run may hold scratch). */
void hs_scratch_free(void);

#endif
