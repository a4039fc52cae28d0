/* hs_genie.h - Qualcomm AI Hub Genie graphs (prompt_ar{A}_cl{C}_{k}_of_{N} / token_ar1_cl{C}_{k}_of_{N}),
 * see FORMAT.md "Genie graphs" and docs/genie.md. hs_genie_format.c holds what the parser needs (both
 * libraries), hs_genie.c the execution (libQnnHtp.so only). */
#ifndef HOSTSIM_GENIE_H
#define HOSTSIM_GENIE_H

#include <stddef.h>
#include <stdint.h>

#include "hs_format.h"
#include "hs_model.h"

/* hs_genie_io locates a Genie graph's tensors by name. Layer indices in the names are global
 * (layer0 + i); the arrays are indexed by the part-local layer i. */
typedef struct {
  int ids, mask, cos, sin, hin; /* input indices, -1 if absent */
  int hout, logits;             /* output indices, -1 if absent */
  int *kin, *vin, *kout, *vout; /* [layers] */
  int first, last;              /* part 1 (input_ids -> hidden), the last part (-> logits) */
  uint32_t ar, cl, p;           /* rows per call, mask columns, past slots (cl - ar) */
} hs_genie_io;

int hs_genie_check(const hs_desc *d, const hs_graph *g, char *err, size_t n);
/* hs_genie_bind fills io (its arrays are malloc'd; free with hs_genie_io_free); 0 or -1 with err. */
int hs_genie_bind(const hs_desc *d, const hs_graph *g, hs_genie_io *io, char *err, size_t n);
void hs_genie_io_free(hs_genie_io *io);

/* hs_genie_scratch bounds the scratch (hs_scratch.h) one call of graph g takes: every row live, every
 * past slot open. */
size_t hs_genie_scratch(const hs_model *m, const hs_graph *g);

/* hs_genie_run executes graph g; 0, or a QNN error code with the reason in err. */
uint32_t hs_genie_run(const hs_model *m, const hs_graph *g, void **in, void **out, char *err, size_t n);

#endif
