/* hs_pte.h - ExecuTorch "static llama" graphs (prefill_forward / kv_forward), see FORMAT.md
 * "ExecuTorch graphs". hs_pte_format.c holds what the parser needs (both libraries), hs_pte.c
 * the execution (libQnnHtp.so only). */
#ifndef HOSTSIM_PTE_H
#define HOSTSIM_PTE_H

#include <stddef.h>
#include <stdint.h>

#include "hs_format.h"
#include "hs_model.h"

/* hs_is_et reports whether kind is an ExecuTorch graph kind. */
static inline int hs_is_et(uint32_t kind) { return kind == HS_KIND_ET_PREFILL || kind == HS_KIND_ET_DECODE; }

/* hs_et_io locates an ExecuTorch graph's tensors by role. Inputs are found by the node name in
 * `input_<k>_<node>@0`; outputs by position (V0, K0, V1, K1, ..., then logits, or hidden, cos, sin). */
typedef struct {
  int tokens, pos, mask, h, cos, sin; /* input indices, -1 if absent */
  int *k, *v;                         /* [layers] input indices of the caches */
  int first, last;                    /* first shard (tokens in), last shard (logits out) */
  uint32_t ar, cl, s;                 /* rows per call, mask columns, cache slots (cl - ar) */
} hs_et_io;

/* hs_et_check validates an ExecuTorch graph against the header; 0 or -1 with err. */
int hs_et_check(const hs_desc *d, const hs_graph *g, char *err, size_t n);
/* hs_et_bind fills io (io->k/io->v are malloc'd; free with hs_et_io_free); 0 or -1 with err. */
int hs_et_bind(const hs_desc *d, const hs_graph *g, hs_et_io *io, char *err, size_t n);
void hs_et_io_free(hs_et_io *io);

/* hs_et_run executes graph g. forced >= 0 is a HOSTSIM_SCRIPT token written into every logits row.
 * Returns 0, or a QNN error code with the reason in err. */
uint32_t hs_et_run(const hs_model *m, const hs_graph *g, void **in, void **out, long forced, char *err, size_t n);

/* hs_et_forget drops what hs_et_run remembers about output buffers (which logits rows it left
 * poisoned): call it when buffers may be released or reused. */
void hs_et_forget(void);

#endif
