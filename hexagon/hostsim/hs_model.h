/* hs_model.h - weights in memory and the Llama forward pass on the CPU. */
#ifndef HOSTSIM_MODEL_H
#define HOSTSIM_MODEL_H

#include <stdint.h>

#include "hs_format.h"
#include "hs_kernels.h"

typedef struct {
  hs_mat in_norm, q, k, v, o, post_norm, gate, up, down;
  hs_mat qb, kb, vb, qn, kn; /* HS_FLAG_QKVBIAS biases, HS_FLAG_QKNORM norms (else cols 0) */
} hs_layer;

typedef struct {
  hs_desc d;
  hs_layer *layers;
  hs_mat norm, lm, embed; /* embed: ExecuTorch graphs look tokens up themselves */
  int has_layers, has_lm, has_embed;
  void *mem;
  uint64_t mem_size, weight_bytes;
} hs_model;

/* hs_model_load parses buf and copies the weights it needs (buf may be released afterwards). */
int hs_model_load(const uint8_t *buf, uint64_t size, hs_model *m, char *err, size_t errlen);
void hs_model_free(hs_model *m);

/* hs_forward runs AR rows through all layers.
 * x [AR,H] (overwritten), cos/sin [AR,D];
 * npast opened past slots: pmask [AR,npast] additive (-INFINITY = blocked), pk/pv[l] [npast,kv_dim];
 * smask [AR,AR] additive over the window rows (-INFINITY = blocked);
 * y [AR,H]; newk/newv[l] [AR,kv_dim]. */
void hs_forward(const hs_model *m, int AR, float *x, const float *cos, const float *sin, int npast,
                const float *pmask, float *const *pk, float *const *pv, const float *smask, float *y, float **newk,
                float **newv);
/* Padding rows. A window row whose mask attends no position (past slot or window row) is padding:
 * hostsim skips its compute and poisons its outputs (hs_poison), as its numbers are never meant to
 * be read. hs_live lists the rows that carry work: those with an open column, and the window rows
 * they attend (transitively, so a live row always has its attended rows' K/V). opens[i] says whether
 * row i has any open column; smask is [AR,AR] additive (-INFINITY = blocked). Returns the count,
 * the indices ascending in live. */
int hs_live(int AR, const unsigned char *opens, const float *smask, int *live);
/* hs_compact moves the live rows to the front in place: x [AR,H], cs/sn [AR,D], pmask [AR,npast] row
 * by row, smask [AR,AR] to [nl,nl] over the live rows. Each live row then runs exactly as it would
 * among all AR rows (its attended columns keep their order). */
void hs_compact(int AR, int nl, const int *live, float *x, int H, float *cs, float *sn, int D, float *pmask, int npast,
                float *smask);

/* hs_embed_scale multiplies n embedding values by Granite's embedding multiplier (nothing without it). */
void hs_embed_scale(const hs_model *m, float *x, size_t n);
/* hs_lmhead computes logits [V] = W · x (divided by Granite's logits scaling). */
void hs_lmhead(const hs_model *m, const float *x, float *logits);
/* hs_lmhead_n computes n rows: logits [n,V] = x [n,H] · Wᵀ. */
void hs_lmhead_n(const hs_model *m, const float *x, int n, float *logits);

/* The KV layouts of the graphs' caches and new entries: K transposed, [n_kv·hd][slots], V
 * [n_kv][slots][hd]; the attention works on rows [n][n_kv·hd]. */
/* hs_gather_k copies the K cache kc's ([KVD][S]) slots open[0..npast) into rows of dst. */
void hs_gather_k(float *dst, const float *kc, int KVD, int S, const int *open, int npast);
/* hs_scatter_k writes rows [n][KVD] into a K output [KVD][AR], row a into slot at[a]. */
void hs_scatter_k(float *dst, const float *rows, int KVD, int AR, const int *at, int n);
/* hs_scatter_v writes rows [n][n_kv·hd] into a V output [n_kv][AR][hd], row a into slot at[a]. */
void hs_scatter_v(float *dst, const float *rows, int NKV, int HD, int AR, const int *at, int n);
/* hs_rope_row expands a row's half-width cos/sin (ch, sh: half values) to both halves of cs, sn. */
void hs_rope_row(float *cs, float *sn, const float *ch, const float *sh, int half);

#endif
