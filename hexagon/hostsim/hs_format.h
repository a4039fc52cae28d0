/* hs_format.h - parser for hostsim's context-binary format (FORMAT.md), shared by
 * libQnnHtp.so and libQnnSystem.so. */
#ifndef HOSTSIM_FORMAT_H
#define HOSTSIM_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define HS_MAX_RANK 8

enum { HS_KIND_PREFILL = 0, HS_KIND_DECODE = 1, HS_KIND_LMHEAD = 2, HS_KIND_ET_PREFILL = 3, HS_KIND_ET_DECODE = 4, HS_KIND_GENIE = 5 };
enum { HS_CONTRACT_QHEXRT = 0, HS_CONTRACT_CHUNKED = 1 };
enum { HS_MASK_ADDITIVE = 0, HS_MASK_U16 = 1 };
enum { HS_W_F16 = 1, HS_W_INT8 = 2, HS_W_F32 = 3 };
/* Tensor roles (FORMAT.md): what a graph input or output is, whatever its name. */
enum {
  HS_ROLE_X = 0, HS_ROLE_COS = 1, HS_ROLE_SIN = 2, HS_ROLE_CMASK = 3, HS_ROLE_Y = 4,
  HS_ROLE_PAST_K = 5, HS_ROLE_PAST_V = 6, HS_ROLE_NEW_K = 7, HS_ROLE_NEW_V = 8, HS_ROLE_LOGITS = 9,
  HS_NUM_ROLES = 10
};

typedef struct {
  char *name;
  uint32_t id;
  uint32_t dtype;
  float scale;
  int32_t offset;
  uint32_t rank;
  uint32_t dims[HS_MAX_RANK];
  uint64_t nelem;
  uint64_t nbytes;
  uint32_t role, layer; /* HS_ROLE_*; layer index for the per-layer roles, else 0 */
} hs_tensor;

typedef struct {
  char *name;
  uint32_t kind, contract, window, mask, kvtype;
  uint32_t nin, nout;
  hs_tensor *in, *out;
} hs_graph;

typedef struct {
  char *name;
  uint32_t storage, rows, cols;
  uint64_t off, size, soff;
} hs_weight_ref;

/* Header flags (FORMAT.md): the lm-head is the embedding; Qwen3's per-head q/k RMSNorm before
 * RoPE (self_attn.q_norm/k_norm.weight [1,head_dim]); Qwen2's q/k/v projection biases
 * (self_attn.{q,k,v}_proj.bias [1,out]). */
#define HS_FLAG_TIED 1u
#define HS_FLAG_QKNORM 2u
#define HS_FLAG_QKVBIAS 4u
/* LongRoPE (Phi-3) in the ExecuTorch graphs: inv_freq[i] = 1/(ext[i]·θ^(2i/D)) with ext the weight
 * rope.ext_factor [1,D/2] (float32, first shard), cos and sin times the header's factor field. */
#define HS_FLAG_LONGROPE 8u
/* Granite's multipliers (embedding, attention, residual, logits scaling), as four f32 at header
 * bytes 128..143: a header with this flag is 144 bytes. A file may carry it beside LONGROPE. */
#define HS_FLAG_SCALES 16u
#define HS_FLAGS_KNOWN 31u

typedef struct {
  uint32_t hidden, layers, heads, kv_heads, head_dim, ffn, vocab, ctx;
  float eps;
  uint32_t flags;
  uint32_t ngraphs, nweights;
  hs_graph *graphs;
  hs_weight_ref *weights;
  uint64_t data_off, file_size;
  /* ExecuTorch graphs (header bytes 96..123): shard layout and RoPE */
  uint32_t layer0, shards, rope_orig;
  float rope_theta, rope_factor, rope_lo, rope_hi;
  float *rope_ext; /* HS_FLAG_LONGROPE: rope.ext_factor's D/2 values when the file holds it, else NULL */
  /* HS_FLAG_SCALES (header bytes 128..143), else 1, 0, 1, 1: the embedding rows are multiplied
   * by emb_mult, the attention scores by att_mult (0: 1/√D), each layer's two residual branches by
   * res_mult, and the logits divided by logit_scale. */
  float emb_mult, att_mult, res_mult, logit_scale;
} hs_desc;

/* hs_parse parses and validates buf; returns 0, or -1 with a message in err. */
int hs_parse(const uint8_t *buf, uint64_t size, hs_desc *out, char *err, size_t errlen);
void hs_desc_free(hs_desc *d);

/* hs_dtype_bytes returns the element size of a supported I/O data type, or 0. */
uint32_t hs_dtype_bytes(uint32_t dtype);
int hs_find_tensor(const hs_tensor *ts, uint32_t n, const char *name);
/* hs_find_role returns the index of the tensor with role (and layer), or -1. */
int hs_find_role(const hs_tensor *ts, uint32_t n, uint32_t role, uint32_t layer);
const hs_weight_ref *hs_find_weight(const hs_desc *d, const char *name);

/* hs_fail formats a message into err (n bytes) and returns -1. */
int hs_fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* hs_want checks tensor t of graph g: its dims against dims (rank of them), its data type against
 * the allowed list types (0-terminated); 0, or -1 with the reason in err. */
int hs_want(const hs_graph *g, const hs_tensor *t, uint32_t rank, const uint32_t *dims, const uint32_t *types,
            char *err, size_t n);
/* hs_want_weights checks that d holds the weights graph g needs: those of layers [0, L), the
 * embedding when first, the final norm and the lm-head (tied: the embedding) when last; 0, or -1
 * with the reason in err. */
int hs_want_weights(const hs_desc *d, const hs_graph *g, uint32_t L, int first, int last, char *err, size_t n);

#endif
