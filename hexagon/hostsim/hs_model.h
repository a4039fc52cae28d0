/* hs_model.h - weights in memory and the Llama forward pass on the CPU. */
#ifndef HOSTSIM_MODEL_H
#define HOSTSIM_MODEL_H

#include <stdint.h>

#include "hs_format.h"

typedef struct {
  uint32_t storage; /* HS_W_F16 (kept as f16), HS_W_INT8, HS_W_F32 (also f16 converted at load) */
  uint32_t rows, cols;
  const float *f32;
  const uint16_t *f16;
  const int8_t *i8;
  const float *scales;
} hs_mat;

typedef struct {
  hs_mat in_norm, q, k, v, o, post_norm, gate, up, down;
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
/* hs_lmhead computes logits [V] = W · x. */
void hs_lmhead(const hs_model *m, const float *x, float *logits);
/* hs_lmhead_n computes n rows: logits [n,V] = x [n,H] · Wᵀ. */
void hs_lmhead_n(const hs_model *m, const float *x, int n, float *logits);

float hs_f16_to_f32(uint16_t h);
uint16_t hs_f32_to_f16(float f);

#endif
