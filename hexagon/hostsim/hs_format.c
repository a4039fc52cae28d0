/* hs_format.c - parser for hostsim's context-binary format (see FORMAT.md). */
#include "hs_format.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_genie.h"
#include "hs_pte.h"
#include "qnn_abi.h"

typedef struct {
  const uint8_t *p;
  uint64_t size, pos;
  int bad;
} rd;

static uint32_t rd_u32(rd *r) {
  if (r->bad || r->size - r->pos < 4 || r->pos > r->size) { r->bad = 1; return 0; }
  const uint8_t *b = r->p + r->pos;
  r->pos += 4;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint64_t rd_u64(rd *r) {
  uint64_t lo = rd_u32(r);
  uint64_t hi = rd_u32(r);
  return lo | hi << 32;
}
static float rd_f32(rd *r) {
  uint32_t u = rd_u32(r);
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static char *rd_str(rd *r) {
  uint32_t n = rd_u32(r);
  if (r->bad || n > 4096 || r->size - r->pos < n) { r->bad = 1; return NULL; }
  char *s = malloc(n + 1);
  if (!s) { r->bad = 1; return NULL; }
  memcpy(s, r->p + r->pos, n);
  s[n] = 0;
  r->pos += (n + 3u) & ~3u;
  if (r->pos > r->size) r->bad = 1;
  return s;
}

uint32_t hs_dtype_bytes(uint32_t dt) {
  switch (dt) {
  case QNN_DATATYPE_FLOAT_32:
  case QNN_DATATYPE_INT_32: return 4;
  case QNN_DATATYPE_FLOAT_16:
  case QNN_DATATYPE_UFIXED_POINT_16:
  case QNN_DATATYPE_SFIXED_POINT_16:
  case QNN_DATATYPE_UINT_16: return 2;
  case QNN_DATATYPE_UFIXED_POINT_8: return 1;
  default: return 0;
  }
}

int hs_find_tensor(const hs_tensor *ts, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(ts[i].name, name) == 0) return (int)i;
  return -1;
}

int hs_find_role(const hs_tensor *ts, uint32_t n, uint32_t role, uint32_t layer) {
  for (uint32_t i = 0; i < n; i++)
    if (ts[i].role == role && ts[i].layer == layer) return (int)i;
  return -1;
}

const hs_weight_ref *hs_find_weight(const hs_desc *d, const char *name) {
  for (uint32_t i = 0; i < d->nweights; i++)
    if (strcmp(d->weights[i].name, name) == 0) return &d->weights[i];
  return NULL;
}

void hs_desc_free(hs_desc *d) {
  if (!d) return;
  free(d->rope_ext);
  d->rope_ext = NULL;
  for (uint32_t g = 0; d->graphs && g < d->ngraphs; g++) {
    hs_graph *gr = &d->graphs[g];
    free(gr->name);
    for (uint32_t i = 0; gr->in && i < gr->nin; i++) free(gr->in[i].name);
    for (uint32_t i = 0; gr->out && i < gr->nout; i++) free(gr->out[i].name);
    free(gr->in);
    free(gr->out);
  }
  free(d->graphs);
  for (uint32_t i = 0; d->weights && i < d->nweights; i++) free(d->weights[i].name);
  free(d->weights);
  memset(d, 0, sizeof *d);
}

int hs_fail(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return -1;
}

static void dims_str(uint32_t rank, const uint32_t *d, char *buf, size_t n) {
  size_t o = (size_t)snprintf(buf, n, "[");
  for (uint32_t i = 0; i < rank && o < n; i++) o += (size_t)snprintf(buf + o, n - o, i ? ",%u" : "%u", d[i]);
  if (o < n) snprintf(buf + o, n - o, "]");
}

int hs_want(const hs_graph *g, const hs_tensor *t, uint32_t rank, const uint32_t *dims, const uint32_t *types,
            char *err, size_t n) {
  char a[96], b[96];
  int ok = t->rank == rank;
  for (uint32_t i = 0; ok && i < rank; i++) ok = t->dims[i] == dims[i];
  if (!ok) {
    dims_str(t->rank, t->dims, a, sizeof a);
    dims_str(rank, dims, b, sizeof b);
    return hs_fail(err, n, "graph %s: tensor %s is %s, want %s", g->name, t->name, a, b);
  }
  for (int i = 0; types[i]; i++)
    if (t->dtype == types[i]) return 0;
  return hs_fail(err, n, "graph %s: tensor %s: data type 0x%04x not allowed here", g->name, t->name, t->dtype);
}

/* hs_want_family_weights checks the weights the header's family flags add to layers [0, L). */
static int hs_want_family_weights(const hs_desc *d, const hs_graph *g, uint32_t L, char *err, size_t n) {
  static const char *bias[] = {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"};
  static const char *norm[] = {"self_attn.q_norm.weight", "self_attn.k_norm.weight"};
  char nm[96];
  for (uint32_t l = 0; l < L; l++) {
    for (int j = 0; j < 3 && (d->flags & HS_FLAG_QKVBIAS); j++) {
      snprintf(nm, sizeof nm, "model.layers.%u.%s", l, bias[j]);
      if (!hs_find_weight(d, nm)) return hs_fail(err, n, "graph %s needs weight %s (the header says q/k/v biases)", g->name, nm);
    }
    for (int j = 0; j < 2 && (d->flags & HS_FLAG_QKNORM); j++) {
      snprintf(nm, sizeof nm, "model.layers.%u.%s", l, norm[j]);
      if (!hs_find_weight(d, nm)) return hs_fail(err, n, "graph %s needs weight %s (the header says q/k norms)", g->name, nm);
    }
  }
  return 0;
}

int hs_want_weights(const hs_desc *d, const hs_graph *g, uint32_t L, int first, int last, char *err, size_t n) {
  static const char *lw[] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                             "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                             "mlp.down_proj"};
  char nm[96];
  for (uint32_t l = 0; l < L; l++)
    for (size_t j = 0; j < sizeof lw / sizeof lw[0]; j++) {
      snprintf(nm, sizeof nm, "model.layers.%u.%s.weight", l, lw[j]);
      if (!hs_find_weight(d, nm)) return hs_fail(err, n, "graph %s needs weight %s", g->name, nm);
    }
  if (hs_want_family_weights(d, g, L, err, n)) return -1;
  if (first && !hs_find_weight(d, "model.embed_tokens.weight"))
    return hs_fail(err, n, "graph %s needs weight model.embed_tokens.weight", g->name);
  if (last && (!hs_find_weight(d, "model.norm.weight") ||
               !hs_find_weight(d, (d->flags & 1) ? "model.embed_tokens.weight" : "lm_head.weight")))
    return hs_fail(err, n, "graph %s needs model.norm.weight and the lm-head weight", g->name);
  return 0;
}

static int read_tensors(rd *r, hs_tensor *ts, uint32_t n, uint32_t *nextid) {
  for (uint32_t i = 0; i < n; i++) {
    hs_tensor *t = &ts[i];
    t->name = rd_str(r);
    t->role = rd_u32(r);
    t->layer = rd_u32(r);
    t->dtype = rd_u32(r);
    t->scale = rd_f32(r);
    t->offset = (int32_t)rd_u32(r);
    t->rank = rd_u32(r);
    if (r->bad || t->rank == 0 || t->rank > HS_MAX_RANK) return -1;
    t->nelem = 1;
    for (uint32_t k = 0; k < t->rank; k++) {
      t->dims[k] = rd_u32(r);
      if (t->dims[k] == 0) return -1;
      t->nelem *= t->dims[k];
    }
    t->nbytes = t->nelem * hs_dtype_bytes(t->dtype);
    t->id = (*nextid)++;
  }
  return r->bad ? -1 : 0;
}

static const char *const role_names[HS_NUM_ROLES] = {"x", "cos", "sin", "cmask", "y",
                                                     "past_k", "past_v", "new_k", "new_v", "logits"};

/* check_role verifies that the tensor with role (and layer) exists with nelem elements. */
static int check_role(const hs_graph *g, int input, uint32_t role, uint32_t layer, uint64_t nelem, char *err, size_t n) {
  const hs_tensor *ts = input ? g->in : g->out;
  uint32_t cnt = input ? g->nin : g->nout;
  int i = hs_find_role(ts, cnt, role, layer);
  if (i < 0) return hs_fail(err, n, "graph %s: no %s tensor with role %s (layer %u)", g->name, input ? "input" : "output",
                         role_names[role], layer);
  if (ts[i].nelem != nelem)
    return hs_fail(err, n, "graph %s: tensor %s (role %s) has %llu elements, want %llu", g->name, ts[i].name, role_names[role],
                (unsigned long long)ts[i].nelem, (unsigned long long)nelem);
  return 0;
}

/* check_names refuses unknown or repeated roles and repeated tensor names within a graph. */
static int check_names(const hs_desc *d, const hs_graph *g, char *err, size_t n) {
  for (uint32_t i = 0; i < g->nin + g->nout; i++) {
    const hs_tensor *t = i < g->nin ? &g->in[i] : &g->out[i - g->nin];
    if (t->role >= HS_NUM_ROLES) return hs_fail(err, n, "graph %s: tensor %s: unknown role %u", g->name, t->name, t->role);
    int per_layer = t->role == HS_ROLE_PAST_K || t->role == HS_ROLE_PAST_V || t->role == HS_ROLE_NEW_K || t->role == HS_ROLE_NEW_V;
    if (per_layer ? t->layer >= d->layers : t->layer != 0)
      return hs_fail(err, n, "graph %s: tensor %s: bad layer %u for role %s", g->name, t->name, t->layer, role_names[t->role]);
    for (uint32_t k = 0; k < i; k++) {
      const hs_tensor *o = k < g->nin ? &g->in[k] : &g->out[k - g->nin];
      if (!strcmp(o->name, t->name)) return hs_fail(err, n, "graph %s: tensor name %s used twice", g->name, t->name);
      if ((k < g->nin) == (i < g->nin) && o->role == t->role && o->layer == t->layer)
        return hs_fail(err, n, "graph %s: tensors %s and %s have the same role %s (layer %u)", g->name, o->name, t->name,
                    role_names[t->role], t->layer);
    }
  }
  return 0;
}

static int check_graph(const hs_desc *d, const hs_graph *g, char *err, size_t n) {
  for (uint32_t i = 0; i < g->nin + g->nout; i++) {
    const hs_tensor *t = i < g->nin ? &g->in[i] : &g->out[i - g->nin];
    if (hs_dtype_bytes(t->dtype) == 0)
      return hs_fail(err, n, "graph %s: tensor %s: unsupported data type 0x%04x", g->name, t->name, t->dtype);
    if (t->dtype == QNN_DATATYPE_INT_32 && !hs_is_et(g->kind) && g->kind != HS_KIND_GENIE)
      return hs_fail(err, n, "graph %s: tensor %s: INT_32 is only for ExecuTorch graphs", g->name, t->name);
    if ((t->dtype & 0xff00) == 0x0300 || (t->dtype & 0xff00) == 0x0400) {
      if (!(t->scale > 0)) return hs_fail(err, n, "graph %s: tensor %s: fixed point needs scale > 0", g->name, t->name);
    }
  }
  if (hs_is_et(g->kind)) return hs_et_check(d, g, err, n); /* ExecuTorch graphs: roles by name and position */
  if (g->kind == HS_KIND_GENIE) return hs_genie_check(d, g, err, n); /* Genie graphs: tensors by name */
  if (check_names(d, g, err, n)) return -1;
  uint64_t H = d->hidden, D = d->head_dim, CTX = d->ctx, V = d->vocab, KV = (uint64_t)d->kv_heads * d->head_dim;
  char nm[64];
  if (g->kind == HS_KIND_LMHEAD) {
    if (g->nin != 1 || g->nout != 1) return hs_fail(err, n, "graph %s: lmhead needs exactly 1 input and 1 output", g->name);
    if (check_role(g, 1, HS_ROLE_X, 0, H, err, n) || check_role(g, 0, HS_ROLE_LOGITS, 0, V, err, n)) return -1;
    if (!hs_find_weight(d, (d->flags & 1) ? "model.embed_tokens.weight" : "lm_head.weight"))
      return hs_fail(err, n, "graph %s: lm-head weight missing", g->name);
    return 0;
  }
  if (g->kind != HS_KIND_PREFILL && g->kind != HS_KIND_DECODE) return hs_fail(err, n, "graph %s: bad kind %u", g->name, g->kind);
  if (g->mask > HS_MASK_U16) return hs_fail(err, n, "graph %s: bad mask encoding %u", g->name, g->mask);
  uint64_t AR = g->kind == HS_KIND_DECODE ? 1 : g->window;
  if (AR == 0) return hs_fail(err, n, "graph %s: window 0", g->name);
  int past = g->kind == HS_KIND_DECODE || g->contract == HS_CONTRACT_CHUNKED;
  if (g->kind == HS_KIND_PREFILL && g->contract > HS_CONTRACT_CHUNKED) return hs_fail(err, n, "graph %s: bad contract", g->name);
  uint64_t maskn = g->kind == HS_KIND_DECODE ? CTX : (past ? AR * (CTX + AR) : AR * AR);
  if (check_role(g, 1, HS_ROLE_X, 0, AR * H, err, n) || check_role(g, 1, HS_ROLE_COS, 0, AR * D, err, n) ||
      check_role(g, 1, HS_ROLE_SIN, 0, AR * D, err, n) || check_role(g, 1, HS_ROLE_CMASK, 0, maskn, err, n) ||
      check_role(g, 0, HS_ROLE_Y, 0, AR * H, err, n))
    return -1;
  uint32_t wantin = 4, wantout = 1 + 2 * d->layers;
  for (uint32_t l = 0; l < d->layers; l++)
    for (uint32_t j = 0; j < 2; j++) {
      if (check_role(g, 0, HS_ROLE_NEW_K + j, l, AR * KV, err, n)) return -1;
      if (past && check_role(g, 1, HS_ROLE_PAST_K + j, l, CTX * KV, err, n)) return -1;
    }
  if (past) wantin += 2 * d->layers;
  if (g->nin != wantin || g->nout != wantout)
    return hs_fail(err, n, "graph %s: %u inputs / %u outputs, want %u / %u", g->name, g->nin, g->nout, wantin, wantout);
  int i = hs_find_role(g->in, g->nin, HS_ROLE_CMASK, 0);
  if (g->mask == HS_MASK_U16 && g->in[i].dtype != QNN_DATATYPE_UFIXED_POINT_16)
    return hs_fail(err, n, "graph %s: u16 mask needs a UFIXED_POINT_16 cmask", g->name);
  static const char *lw[] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                             "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                             "mlp.down_proj"};
  for (uint32_t l = 0; l < d->layers; l++)
    for (size_t j = 0; j < sizeof lw / sizeof lw[0]; j++) {
      snprintf(nm, sizeof nm, "model.layers.%u.%s.weight", l, lw[j]);
      if (!hs_find_weight(d, nm)) return hs_fail(err, n, "graph %s needs weight %s", g->name, nm);
    }
  if (hs_want_family_weights(d, g, d->layers, err, n)) return -1;
  if (!hs_find_weight(d, "model.norm.weight")) return hs_fail(err, n, "graph %s needs weight model.norm.weight", g->name);
  return 0;
}

static int check_weight_shape(const hs_desc *d, const hs_weight_ref *w, char *err, size_t n) {
  uint64_t H = d->hidden, Q = (uint64_t)d->heads * d->head_dim, KV = (uint64_t)d->kv_heads * d->head_dim;
  uint64_t r = 0, c = 0;
  const char *s = w->name, *p;
  if (!strcmp(s, "model.embed_tokens.weight") || !strcmp(s, "lm_head.weight")) r = d->vocab, c = H;
  else if (!strcmp(s, "model.norm.weight")) r = 1, c = H;
  else if (strstr(s, ".self_attn.q_proj.bias")) r = 1, c = Q;
  else if (strstr(s, ".self_attn.k_proj.bias") || strstr(s, ".self_attn.v_proj.bias")) r = 1, c = KV;
  else if (strstr(s, ".self_attn.q_norm.") || strstr(s, ".self_attn.k_norm.")) r = 1, c = d->head_dim;
  else if ((p = strstr(s, ".self_attn.q_proj."))) r = Q, c = H;
  else if ((p = strstr(s, ".self_attn.k_proj.")) || (p = strstr(s, ".self_attn.v_proj."))) r = KV, c = H;
  else if ((p = strstr(s, ".self_attn.o_proj."))) r = H, c = Q;
  else if ((p = strstr(s, ".mlp.gate_proj.")) || (p = strstr(s, ".mlp.up_proj."))) r = d->ffn, c = H;
  else if ((p = strstr(s, ".mlp.down_proj."))) r = H, c = d->ffn;
  else if (strstr(s, "layernorm.")) r = 1, c = H;
  else return 0; /* unknown names are carried but unused */
  if (w->rows != r || w->cols != c)
    return hs_fail(err, n, "weight %s is [%u,%u], want [%llu,%llu]", s, w->rows, w->cols, (unsigned long long)r,
                (unsigned long long)c);
  return 0;
}

/* read_scales reads Granite's multipliers (header bytes 128..143, flag HS_FLAG_SCALES, header size
 * 144), else sets 1 (att_mult 0: the graphs use 1/√D); 0, or -1 with the reason in err. */
static int read_scales(rd *r, hs_desc *d, uint32_t hsize, uint64_t size, char *err, size_t errlen) {
  int has = (d->flags & HS_FLAG_SCALES) != 0;
  if (has != (hsize == 144))
    return hs_fail(err, errlen, "header size %u with flags 0x%x: the multipliers flag (0x10) and a 144-byte header go together", hsize, d->flags);
  d->emb_mult = 1, d->att_mult = 0, d->res_mult = 1, d->logit_scale = 1;
  if (!has) return 0;
  if (size < 144) return hs_fail(err, errlen, "binary too small (%llu bytes)", (unsigned long long)size);
  r->pos = 128;
  d->emb_mult = rd_f32(r); d->att_mult = rd_f32(r); d->res_mult = rd_f32(r); d->logit_scale = rd_f32(r);
  float v[4] = {d->emb_mult, d->att_mult, d->res_mult, d->logit_scale};
  for (int i = 0; i < 4; i++)
    if (!(v[i] > 0 && v[i] < 1e30f))
      return hs_fail(err, errlen, "bad multipliers in header (embedding %g, attention %g, residual %g, logits scaling %g)",
                     v[0], v[1], v[2], v[3]);
  return 0;
}

int hs_parse(const uint8_t *buf, uint64_t size, hs_desc *d, char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  if (!buf || size < 128) return hs_fail(err, errlen, "binary too small (%llu bytes)", (unsigned long long)size);
  if (memcmp(buf, "HSIMCTX\0", 8) != 0) return hs_fail(err, errlen, "not a hostsim context binary (bad magic)");
  rd r = {buf, size, 8, 0};
  uint32_t version = rd_u32(&r), hsize = rd_u32(&r);
  if (version != 2)
    return hs_fail(err, errlen, "unsupported hostsim format version %u, want 2 (rewrite the file with hexserve mkmodel)", version);
  if (hsize != 128 && hsize != 144) return hs_fail(err, errlen, "bad header size %u", hsize);
  d->hidden = rd_u32(&r); d->layers = rd_u32(&r); d->heads = rd_u32(&r); d->kv_heads = rd_u32(&r);
  d->head_dim = rd_u32(&r); d->ffn = rd_u32(&r); d->vocab = rd_u32(&r); d->ctx = rd_u32(&r);
  d->eps = rd_f32(&r); d->flags = rd_u32(&r); d->ngraphs = rd_u32(&r); d->nweights = rd_u32(&r);
  uint64_t goff = rd_u64(&r), woff = rd_u64(&r);
  d->data_off = rd_u64(&r);
  d->file_size = rd_u64(&r);
  d->layer0 = rd_u32(&r); d->shards = rd_u32(&r); d->rope_theta = rd_f32(&r); d->rope_factor = rd_f32(&r);
  d->rope_lo = rd_f32(&r); d->rope_hi = rd_f32(&r); d->rope_orig = rd_u32(&r);
  if (read_scales(&r, d, hsize, size, err, errlen)) return -1;
  if (d->file_size > size) return hs_fail(err, errlen, "binary truncated: %llu bytes, header says %llu",
                                       (unsigned long long)size, (unsigned long long)d->file_size);
  if (!d->hidden || !d->heads || !d->kv_heads || !d->head_dim || !d->vocab || !d->ctx || d->heads % d->kv_heads ||
      d->head_dim % 2 || !(d->eps > 0) || d->ngraphs == 0 || d->ngraphs > 64 || d->nweights > 100000)
    return hs_fail(err, errlen, "bad hyper-parameters in header");
  if (d->layers && !d->ffn) return hs_fail(err, errlen, "bad hyper-parameters in header (ffn)");
  if (d->flags & ~HS_FLAGS_KNOWN) return hs_fail(err, errlen, "unknown header flags 0x%x (this hostsim knows 0x%x)", d->flags, HS_FLAGS_KNOWN);
  char *e = err;
  d->graphs = calloc(d->ngraphs, sizeof *d->graphs);
  d->weights = calloc(d->nweights ? d->nweights : 1, sizeof *d->weights);
  if (!d->graphs || !d->weights) { hs_desc_free(d); return hs_fail(err, errlen, "out of memory"); }
  r.pos = goff;
  uint32_t nextid = 1;
  for (uint32_t g = 0; g < d->ngraphs; g++) {
    hs_graph *gr = &d->graphs[g];
    gr->name = rd_str(&r);
    gr->kind = rd_u32(&r); gr->contract = rd_u32(&r); gr->window = rd_u32(&r); gr->mask = rd_u32(&r);
    gr->kvtype = rd_u32(&r); gr->nin = rd_u32(&r); gr->nout = rd_u32(&r);
    if (r.bad || gr->nin > 4096 || gr->nout > 4096) goto malformed;
    gr->in = calloc(gr->nin ? gr->nin : 1, sizeof *gr->in);
    gr->out = calloc(gr->nout ? gr->nout : 1, sizeof *gr->out);
    if (!gr->in || !gr->out) goto malformed;
    if (read_tensors(&r, gr->in, gr->nin, &nextid) || read_tensors(&r, gr->out, gr->nout, &nextid)) goto malformed;
    for (uint32_t h = 0; h < g; h++)
      if (!strcmp(d->graphs[h].name, gr->name)) { hs_fail(e, errlen, "duplicate graph name %s", gr->name); goto bad; }
  }
  r.pos = woff;
  for (uint32_t i = 0; i < d->nweights; i++) {
    hs_weight_ref *w = &d->weights[i];
    w->name = rd_str(&r);
    w->storage = rd_u32(&r); w->rows = rd_u32(&r); w->cols = rd_u32(&r);
    w->off = rd_u64(&r); w->size = rd_u64(&r); w->soff = rd_u64(&r);
    if (r.bad) goto malformed;
    uint64_t es = w->storage == HS_W_F16 ? 2 : w->storage == HS_W_INT8 ? 1 : w->storage == HS_W_F32 ? 4 : 0;
    if (!es || !w->rows || !w->cols || w->size != (uint64_t)w->rows * w->cols * es || w->off % 64 ||
        w->off < d->data_off || w->off > size || size - w->off < w->size) {
      hs_fail(e, errlen, "weight %s: bad storage, shape or extent", w->name);
      goto bad;
    }
    if (w->storage == HS_W_INT8 && (w->soff % 64 || w->soff > size || size - w->soff < 4ull * w->rows)) {
      hs_fail(e, errlen, "weight %s: bad scales extent", w->name);
      goto bad;
    }
    if (check_weight_shape(d, w, e, errlen)) goto bad;
    if ((d->flags & HS_FLAG_LONGROPE) && !strcmp(w->name, "rope.ext_factor")) {
      if (w->storage != HS_W_F32 || w->rows != 1 || w->cols != d->head_dim / 2) {
        hs_fail(e, errlen, "weight rope.ext_factor is [%u,%u] (storage %u), want float32 [1,%u]", w->rows, w->cols,
                w->storage, d->head_dim / 2);
        goto bad;
      }
      d->rope_ext = malloc(sizeof(float) * w->cols);
      if (!d->rope_ext) goto malformed;
      memcpy(d->rope_ext, buf + w->off, sizeof(float) * w->cols);
      for (uint32_t j = 0; j < w->cols; j++)
        if (!(d->rope_ext[j] > 0)) { hs_fail(e, errlen, "rope.ext_factor[%u] = %g, want > 0", j, d->rope_ext[j]); goto bad; }
    }
  }
  for (uint32_t g = 0; g < d->ngraphs; g++)
    if (check_graph(d, &d->graphs[g], e, errlen)) goto bad;
  return 0;
malformed:
  hs_fail(e, errlen, "malformed hostsim context binary (truncated or corrupt tables)");
bad:
  hs_desc_free(d);
  return -1;
}
