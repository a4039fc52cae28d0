/* harness.c - hostsim's C test client. It dlopens the built libraries like a real QNN client
 * (getProviders -> log -> backend -> device -> perf vote -> binary info -> context from binary ->
 * graphRetrieve -> memRegister -> graphExecute), runs the public tiny-Llama golden cases
 * (written by hexagon/hostsim/simfile/internal/gentiny) in every variant, and checks the
 * validation errors and test switches.
 * Usage: harness LIBDIR DATADIR */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../qnn_abi.h"

typedef Qnn_ErrorHandle_t E;
static void **T;    /* core function table */
static void **ST;   /* system function table */
static int failures;

#define FN(tab, i, type) ((type)(tab)[i])
#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      failures++;                                                          \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                          \
      printf(__VA_ARGS__);                                                 \
      printf("\n");                                                        \
    }                                                                      \
  } while (0)

typedef E (*getprov_t)(const void ***, uint32_t *);
typedef E (*logcreate_t)(QnnLog_Callback_t, uint32_t, void **);
typedef E (*h_t)(void *);
typedef E (*backendcreate_t)(void *, const void **, void **);
typedef E (*devcreate_t)(void *, const QnnDevice_Config_t **, void **);
typedef E (*ctxbin_t)(void *, void *, const void **, const void *, uint64_t, void **, void *);
typedef E (*ctxfree_t)(void *, void *);
typedef E (*retrieve_t)(void *, const char *, void **);
typedef E (*exec_t)(void *, const Qnn_Tensor_t *, uint32_t, Qnn_Tensor_t *, uint32_t, void *, void *);
typedef E (*memreg_t)(void *, const Qnn_MemDescriptor_t *, uint32_t, void **);
typedef E (*memdereg_t)(void **, uint32_t);
typedef E (*errmsg_t)(E, const char **);
typedef E (*sysctx_t)(void **);
typedef E (*sysinfo_t)(void *, void *, uint64_t, const QnnSystemContext_BinaryInfo_t **, uint64_t *);
typedef E (*infra_t)(const void **);
typedef E (*platinfo_t)(void *, const QnnDevice_PlatformInfo_t **);
typedef E (*platfree_t)(void *, const QnnDevice_PlatformInfo_t *);

static int log_count;
static void log_cb(const char *fmt, uint32_t level, uint64_t ts, va_list ap) {
  (void)level;
  (void)ts;
  char buf[512];
  vsnprintf(buf, sizeof buf, fmt, ap);
  if (strstr(buf, "hostsim")) log_count++;
}

static const char *errtext(E e) {
  const char *m = NULL;
  if (FN(T, SLOT_errorGetMessage, errmsg_t)(e, &m)) return "(no message)";
  return m;
}

static void *read_file(const char *path, uint64_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc((size_t)n);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(2); }
  fclose(f);
  *size = (uint64_t)n;
  return p;
}

/* read_in reads the file name in dir. */
static void *read_in(const char *dir, const char *name, uint64_t *size) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return read_file(path, size);
}

/* ---- numeric conversions (what a client does with the binary's tensor metadata) ---- */
static float f16f(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
  if (e == 0) { float f = ldexpf((float)m, -24); return s ? -f : f; }
  u = e == 31 ? s | 0x7f800000u | m << 13 : s | (e + 112) << 23 | m << 13;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t ff16(float f) {
  /* round to nearest even via double arithmetic: fine for test data in the normal range */
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
  if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);
  if (a < 0x38800000) { float af; memcpy(&af, &a, 4); return (uint16_t)(sign | (uint32_t)lrintf(af * 16777216.0f)); }
  uint32_t h = (((a >> 23) - 112) << 10) | ((a & 0x7fffff) >> 13), rem = a & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}
static uint32_t dt_bytes(uint32_t dt) {
  return dt == QNN_DATATYPE_FLOAT_32 || dt == QNN_DATATYPE_INT_32 ? 4 : dt == QNN_DATATYPE_UFIXED_POINT_8 ? 1 : 2;
}
static void put(const Qnn_Tensor_t *t, void *buf, size_t i, float v) {
  const Qnn_TensorV2_t *x = &t->v2;
  if (x->dataType == QNN_DATATYPE_FLOAT_32) ((float *)buf)[i] = v;
  else if (x->dataType == QNN_DATATYPE_FLOAT_16) ((uint16_t *)buf)[i] = ff16(v);
  else {
    double q = nearbyint(v / x->quantizeParams.scaleOffset.scale) - x->quantizeParams.scaleOffset.offset;
    ((uint16_t *)buf)[i] = (uint16_t)(q < 0 ? 0 : q > 65535 ? 65535 : q);
  }
}
static float get(const Qnn_Tensor_t *t, const void *buf, size_t i) {
  const Qnn_TensorV2_t *x = &t->v2;
  if (x->dataType == QNN_DATATYPE_FLOAT_32) return ((const float *)buf)[i];
  if (x->dataType == QNN_DATATYPE_FLOAT_16) return f16f(((const uint16_t *)buf)[i]);
  return ((float)((const uint16_t *)buf)[i] + (float)x->quantizeParams.scaleOffset.offset) * x->quantizeParams.scaleOffset.scale;
}
static size_t nbytes(const Qnn_Tensor_t *t) {
  size_t n = dt_bytes(t->v2.dataType);
  for (uint32_t i = 0; i < t->v2.rank; i++) n *= t->v2.dimensions[i];
  return n;
}

/* ---- copied graph metadata ---- */
typedef struct {
  char name[64];
  uint32_t nin, nout;
  Qnn_Tensor_t *in, *out; /* deep copies: names and dims owned here */
  void **inbuf, **outbuf;
  void *handle;
} graph;

static void copy_tensors(Qnn_Tensor_t **dst, const Qnn_Tensor_t *src, uint32_t n) {
  *dst = calloc(n, sizeof **dst);
  for (uint32_t i = 0; i < n; i++) {
    (*dst)[i] = src[i];
    (*dst)[i].v2.name = strdup(src[i].v2.name);
    uint32_t *d = malloc(sizeof(uint32_t) * src[i].v2.rank);
    memcpy(d, src[i].v2.dimensions, sizeof(uint32_t) * src[i].v2.rank);
    (*dst)[i].v2.dimensions = d;
  }
}

static int load_graphs(const void *buf, uint64_t size, graph *gs, int max) {
  void *sys = NULL;
  CHECK(FN(ST, 0, sysctx_t)(&sys) == 0, "systemContextCreate");
  const QnnSystemContext_BinaryInfo_t *bi = NULL;
  uint64_t bsz = 0;
  E e = FN(ST, 1, sysinfo_t)(sys, (void *)buf, size, &bi, &bsz);
  CHECK(e == 0 && bi && bsz == 144 && bi->version == 3, "getBinaryInfo: %llu", (unsigned long long)e);
  CHECK(bi->v3.socModel == 69, "socModel %u", bi->v3.socModel);
  int n = (int)bi->v3.numGraphs;
  for (int g = 0; g < n && g < max; g++) {
    const QnnSystemContext_GraphInfo_t *gi = &bi->v3.graphs[g];
    CHECK(gi->version == 1, "graph info version %u", gi->version);
    snprintf(gs[g].name, sizeof gs[g].name, "%s", gi->v3.graphName);
    gs[g].nin = gi->v3.numGraphInputs;
    gs[g].nout = gi->v3.numGraphOutputs;
    copy_tensors(&gs[g].in, gi->v3.graphInputs, gs[g].nin);
    copy_tensors(&gs[g].out, gi->v3.graphOutputs, gs[g].nout);
    gs[g].inbuf = calloc(gs[g].nin, sizeof(void *));
    gs[g].outbuf = calloc(gs[g].nout, sizeof(void *));
  }
  CHECK(FN(ST, 3, h_t)(sys) == 0, "systemContextFree");
  return n;
}

static int find(const Qnn_Tensor_t *ts, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(ts[i].v2.name, name)) return (int)i;
  return -1;
}

static void bind_raw(Qnn_Tensor_t *t, void *buf) {
  t->v2.memType = QNN_TENSORMEMTYPE_RAW;
  t->v2.clientBuf.data = buf;
  t->v2.clientBuf.dataSize = (uint32_t)nbytes(t);
}

/* ---- the model run ---- */
typedef struct {
  int H, L, heads, kvh, D, F, V, CTX;
  double inv[512];
  uint16_t *embed;
} model;
static model M;

typedef struct {
  graph pre, dec, lm;
  int contract, W;
  void *ctx_body, *ctx_lm;
  void **kcache, **vcache; /* per layer [CTX, kv] in the KV dtype, rpcmem-backed and registered */
  void *rpc_block;
  void **memh;
  int nmem;
  size_t kvbytes;
  uint32_t kvtype;
  int additive;
} runner;

static void *(*p_rpcmem_alloc)(int, uint32_t, int);
static void (*p_rpcmem_free)(void *);
static int (*p_rpcmem_to_fd)(void *);

static void set_rope(const graph *g, int ic, int is, int row, int pos) {
  int D = M.D;
  for (int d = 0; d < D; d++) {
    double a = pos * M.inv[d % (D / 2)];
    put(&g->in[ic], g->inbuf[ic], (size_t)row * D + d, (float)cos(a));
    put(&g->in[is], g->inbuf[is], (size_t)row * D + d, (float)sin(a));
  }
}
static void set_x(const graph *g, int ix, int row, int tok) {
  for (int h = 0; h < M.H; h++) {
    float v = tok < 0 ? 0 : M.embed ? f16f(M.embed[(size_t)tok * M.H + h]) : 0.02f * (float)sin(tok * 0.37 + h * 0.11);
    put(&g->in[ix], g->inbuf[ix], (size_t)row * M.H + h, v);
  }
}
/* u16 mask codes the host writes (a test changes them to check that hostsim dequantises them) */
static uint16_t u16_open = 65535, u16_blocked = 0;
static void set_mask(const graph *g, int im, size_t i, int open, int additive) {
  if (additive) put(&g->in[im], g->inbuf[im], i, open ? 0.0f : -65504.0f);
  else ((uint16_t *)g->inbuf[im])[i] = open ? u16_open : u16_blocked;
}

static E execute(graph *g) {
  return FN(T, SLOT_graphExecute, exec_t)(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
}

/* store_kv copies row r of a new_k/new_v output into cache slot pos. */
static void store_kv(runner *r, graph *g, int l, int row, int pos) {
  char nm[32];
  size_t kvrow = (size_t)M.kvh * M.D * dt_bytes(r->kvtype);
  snprintf(nm, sizeof nm, "new_k_%d", l);
  int ik = find(g->out, g->nout, nm);
  snprintf(nm, sizeof nm, "new_v_%d", l);
  int iv = find(g->out, g->nout, nm);
  memcpy((char *)r->kcache[l] + (size_t)pos * kvrow, (char *)g->outbuf[ik] + (size_t)row * kvrow, kvrow);
  memcpy((char *)r->vcache[l] + (size_t)pos * kvrow, (char *)g->outbuf[iv] + (size_t)row * kvrow, kvrow);
}

/* lm runs the lm-head graph on row `row` of g's y output into logits. */
static void lm(runner *r, graph *g, int row, float *logits) {
  int iy = find(g->out, g->nout, "y");
  for (int h = 0; h < M.H; h++) put(&r->lm.in[0], r->lm.inbuf[0], (size_t)h, get(&g->out[iy], g->outbuf[iy], (size_t)row * M.H + h));
  E e = execute(&r->lm);
  CHECK(e == 0, "lmhead execute: %llu %s", (unsigned long long)e, errtext(e));
  for (int v = 0; v < M.V; v++) logits[v] = get(&r->lm.out[0], r->lm.outbuf[0], (size_t)v);
}

static void decode_step(runner *r, int tok, int pos, float *logits) {
  graph *g = &r->dec;
  set_x(g, find(g->in, g->nin, "x"), 0, tok);
  set_rope(g, find(g->in, g->nin, "cos"), find(g->in, g->nin, "sin"), 0, pos);
  int im = find(g->in, g->nin, "cmask");
  for (int j = 0; j < M.CTX; j++) set_mask(g, im, (size_t)j, j < pos, r->additive);
  E e = execute(g);
  CHECK(e == 0, "decode execute: %llu %s", (unsigned long long)e, errtext(e));
  for (int l = 0; l < M.L; l++) store_kv(r, g, l, 0, pos);
  if (logits) lm(r, g, 0, logits);
}

/* eval processes tokens[start..n) and, for each position p with want[p], writes logits into out[p]. */
static void eval(runner *r, const int *tokens, int start, int n, float **out) {
  int p = start;
  graph *g = &r->pre;
  int ix = find(g->in, g->nin, "x"), ic = find(g->in, g->nin, "cos"), is = find(g->in, g->nin, "sin"),
      im = find(g->in, g->nin, "cmask");
  while (p < n) {
    if (r->contract == 0 && p != 0) { decode_step(r, tokens[p], p, out[p]); p++; continue; }
    int cnt = n - p < r->W ? n - p : r->W;
    if (r->contract == 1 && p + r->W > M.CTX) { decode_step(r, tokens[p], p, out[p]); p++; continue; }
    int W = r->W, stride = r->contract == 1 ? M.CTX + W : W;
    for (int i = 0; i < W; i++) {
      set_x(g, ix, i, i < cnt ? tokens[p + i] : -1);
      set_rope(g, ic, is, i, p + i);
      for (int j = 0; j < stride; j++) {
        int open;
        if (r->contract == 1) open = j < M.CTX ? j < p : (j - M.CTX) <= i;
        else open = j <= i;
        set_mask(g, im, (size_t)i * stride + j, open, r->additive);
      }
    }
    E e = execute(g);
    CHECK(e == 0, "prefill execute: %llu %s", (unsigned long long)e, errtext(e));
    for (int i = 0; i < cnt; i++) {
      for (int l = 0; l < M.L; l++) store_kv(r, g, l, i, p + i);
      if (out[p + i]) lm(r, g, i, out[p + i]);
    }
    p += cnt;
  }
}

static int argmax(const float *v, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

/* ---- golden cases ---- */
typedef struct {
  char name[32];
  int n, *prompt;
  int nchecks, *pos, (*top_id)[20];
  double (*top_logit)[20];
  int ngreedy, *greedy;
  double *margin;
} gcase;
static gcase cases[8];
static int ncases;

static void read_cases(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) { perror(path); exit(2); }
  int ninv;
  if (fscanf(f, " model %d %d %d %d %d %d %d %d invfreq %d", &M.H, &M.L, &M.heads, &M.kvh, &M.D, &M.F, &M.V, &M.CTX, &ninv) != 9) exit(3);
  for (int i = 0; i < ninv; i++) if (fscanf(f, "%lf", &M.inv[i]) != 1) exit(3);
  if (fscanf(f, " cases %d", &ncases) != 1) exit(3);
  for (int c = 0; c < ncases; c++) {
    gcase *g = &cases[c];
    if (fscanf(f, " case %31s %d", g->name, &g->n) != 2) exit(3);
    g->prompt = malloc(sizeof(int) * (size_t)g->n);
    for (int i = 0; i < g->n; i++) if (fscanf(f, "%d", &g->prompt[i]) != 1) exit(3);
    if (fscanf(f, " checks %d", &g->nchecks) != 1) exit(3);
    g->pos = malloc(sizeof(int) * (size_t)g->nchecks);
    g->top_id = malloc(sizeof *g->top_id * (size_t)g->nchecks);
    g->top_logit = malloc(sizeof *g->top_logit * (size_t)g->nchecks);
    for (int k = 0; k < g->nchecks; k++) {
      int nt;
      if (fscanf(f, " check %d %d", &g->pos[k], &nt) != 2 || nt != 20) exit(3);
      for (int t = 0; t < 20; t++) if (fscanf(f, "%d %lf", &g->top_id[k][t], &g->top_logit[k][t]) != 2) exit(3);
    }
    if (fscanf(f, " greedy %d", &g->ngreedy) != 1) exit(3);
    g->greedy = malloc(sizeof(int) * (size_t)g->ngreedy);
    g->margin = malloc(sizeof(double) * (size_t)g->ngreedy);
    for (int k = 0; k < g->ngreedy; k++) if (fscanf(f, "%d %lf", &g->greedy[k], &g->margin[k]) != 2) exit(3);
  }
  fclose(f);
}

static void alloc_io(graph *g) {
  for (uint32_t i = 0; i < g->nin; i++) {
    if (!strncmp(g->in[i].v2.name, "past_", 5)) continue;
    g->inbuf[i] = calloc(1, nbytes(&g->in[i]));
    bind_raw(&g->in[i], g->inbuf[i]);
  }
  for (uint32_t i = 0; i < g->nout; i++) {
    g->outbuf[i] = calloc(1, nbytes(&g->out[i]));
    bind_raw(&g->out[i], g->outbuf[i]);
  }
}

/* bind_cache registers every past_* input of g as a slice of the shared rpcmem block (CUSTOM). */
static void bind_cache(runner *r, graph *g, void *ctx) {
  char nm[32];
  for (int l = 0; l < M.L; l++)
    for (int kv = 0; kv < 2; kv++) {
      snprintf(nm, sizeof nm, "past_%c_%d", kv ? 'v' : 'k', l);
      int i = find(g->in, g->nin, nm);
      CHECK(i >= 0, "graph %s lacks %s", g->name, nm);
      if (i < 0) continue;
      void *p = kv ? r->vcache[l] : r->kcache[l];
      if (g == &r->pre) { /* same context, same shape: reuse the decode graph's handle */
        char dn[32];
        snprintf(dn, sizeof dn, "past_%c_%d", kv ? 'v' : 'k', l);
        int di = find(r->dec.in, r->dec.nin, dn);
        g->in[i].v2.memType = QNN_TENSORMEMTYPE_MEMHANDLE;
        g->in[i].v2.memHandle = r->dec.in[di].v2.memHandle;
        continue;
      }
      QnnMemHtp_Descriptor_t *hd = calloc(1, sizeof *hd);
      hd->type = QNN_HTP_MEM_SHARED_BUFFER;
      hd->size = r->kvbytes * 2 * (size_t)M.L;
      hd->sharedBufferConfig.fd = p_rpcmem_to_fd(p);
      hd->sharedBufferConfig.offset = (uint64_t)((char *)p - (char *)r->rpc_block);
      Qnn_MemDescriptor_t md;
      memset(&md, 0, sizeof md);
      md.memShape.numDim = g->in[i].v2.rank;
      md.memShape.dimSize = g->in[i].v2.dimensions;
      md.dataType = g->in[i].v2.dataType;
      md.memType = QNN_MEM_TYPE_CUSTOM;
      md.customInfo = hd;
      void *h = NULL;
      E e = FN(T, SLOT_memRegister, memreg_t)(ctx, &md, 1, &h);
      CHECK(e == 0, "memRegister %s: %llu %s", nm, (unsigned long long)e, errtext(e));
      free(hd);
      r->memh[r->nmem++] = h;
      g->in[i].v2.memType = QNN_TENSORMEMTYPE_MEMHANDLE;
      g->in[i].v2.memHandle = h;
    }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void open_runner(runner *r, const char *dir, const char *body, const char *lmfile, void *backend, void *device) {
  uint64_t sz;
  graph gs[4];
  memset(gs, 0, sizeof gs);
  void *buf = read_in(dir, body, &sz);
  int n = load_graphs(buf, sz, gs, 4);
  CHECK(n == 2, "%s: %d graphs", body, n);
  for (int i = 0; i < n; i++) {
    if (!strcmp(gs[i].name, "prefill")) r->pre = gs[i];
    if (!strcmp(gs[i].name, "decode")) r->dec = gs[i];
  }
  E e = FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, NULL, buf, sz, &r->ctx_body, NULL);
  CHECK(e == 0, "contextCreateFromBinary %s: %llu %s", body, (unsigned long long)e, errtext(e));
  memset(buf, 0xA5, sz); /* the backend must have copied what it needs */
  free(buf);
  buf = read_in(dir, lmfile, &sz);
  memset(gs, 0, sizeof gs);
  n = load_graphs(buf, sz, gs, 4);
  CHECK(n == 1 && !strcmp(gs[0].name, "lmhead"), "%s graphs", lmfile);
  r->lm = gs[0];
  e = FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, NULL, buf, sz, &r->ctx_lm, NULL);
  CHECK(e == 0, "contextCreateFromBinary %s: %llu %s", lmfile, (unsigned long long)e, errtext(e));
  free(buf);
  CHECK(FN(T, SLOT_graphRetrieve, retrieve_t)(r->ctx_body, "prefill", &r->pre.handle) == 0, "retrieve prefill");
  CHECK(FN(T, SLOT_graphRetrieve, retrieve_t)(r->ctx_body, "decode", &r->dec.handle) == 0, "retrieve decode");
  CHECK(FN(T, SLOT_graphRetrieve, retrieve_t)(r->ctx_lm, "lmhead", &r->lm.handle) == 0, "retrieve lmhead");
  alloc_io(&r->pre);
  alloc_io(&r->dec);
  alloc_io(&r->lm);
  int ik = find(r->dec.in, r->dec.nin, "past_k_0");
  r->kvtype = r->dec.in[ik].v2.dataType;
  r->kvbytes = nbytes(&r->dec.in[ik]);
  r->rpc_block = p_rpcmem_alloc(25, 1, (int)(r->kvbytes * 2 * (size_t)M.L));
  CHECK(r->rpc_block != NULL, "rpcmem_alloc");
  r->kcache = calloc((size_t)M.L, sizeof(void *));
  r->vcache = calloc((size_t)M.L, sizeof(void *));
  for (int l = 0; l < M.L; l++) {
    r->kcache[l] = (char *)r->rpc_block + (size_t)(2 * l) * r->kvbytes;
    r->vcache[l] = (char *)r->rpc_block + (size_t)(2 * l + 1) * r->kvbytes;
  }
  r->memh = calloc((size_t)M.L * 4, sizeof(void *));
  bind_cache(r, &r->dec, r->ctx_body);
  r->contract = find(r->pre.in, r->pre.nin, "past_k_0") >= 0;
  if (r->contract) bind_cache(r, &r->pre, r->ctx_body);
  int im = find(r->dec.in, r->dec.nin, "cmask");
  uint32_t mt = r->dec.in[im].v2.dataType;
  r->additive = mt != QNN_DATATYPE_UFIXED_POINT_16; /* UFIXED_POINT_16 masks get raw codes 65535 / 0 */
  int ix = find(r->pre.in, r->pre.nin, "x");
  r->W = (int)r->pre.in[ix].v2.dimensions[0];
}

static void free_graph(graph *g) {
  for (uint32_t i = 0; i < g->nin; i++) { free((void *)g->in[i].v2.name); free(g->in[i].v2.dimensions); free(g->inbuf[i]); }
  for (uint32_t i = 0; i < g->nout; i++) { free((void *)g->out[i].v2.name); free(g->out[i].v2.dimensions); free(g->outbuf[i]); }
  free(g->in); free(g->out); free(g->inbuf); free(g->outbuf);
}

static void close_runner(runner *r) {
  CHECK(FN(T, SLOT_memDeRegister, memdereg_t)(r->memh, (uint32_t)r->nmem) == 0, "memDeRegister");
  CHECK(FN(T, SLOT_contextFree, ctxfree_t)(r->ctx_body, NULL) == 0, "contextFree body");
  CHECK(FN(T, SLOT_contextFree, ctxfree_t)(r->ctx_lm, NULL) == 0, "contextFree lm");
  p_rpcmem_free(r->rpc_block);
  free_graph(&r->pre); free_graph(&r->dec); free_graph(&r->lm);
  free(r->kcache); free(r->vcache); free(r->memh);
}

/* run_variant runs every golden case; returns the max top-20 logit error. */
static void run_variant(const char *dir, const char *name, const char *body, const char *lmfile, int exact, void *backend, void *device) {
  runner r;
  memset(&r, 0, sizeof r);
  open_runner(&r, dir, body, lmfile, backend, device);
  double maxerr = 0, t0 = now_s();
  int top1 = 0, ntop = 0, greedy_ok = 0, greedy_n = 0, tokens_run = 0;
  double diverge_margin = 0; /* largest golden margin at a step where greedy diverged */
  char detail[512] = "";
  for (int c = 0; c < ncases; c++) {
    gcase *g = &cases[c];
    int total = g->n + g->ngreedy;
    int *toks = malloc(sizeof(int) * (size_t)total);
    float **out = calloc((size_t)total, sizeof(float *));
    memcpy(toks, g->prompt, sizeof(int) * (size_t)g->n);
    for (int k = 0; k < g->nchecks; k++) out[g->pos[k]] = malloc(sizeof(float) * (size_t)M.V);
    if (!out[g->n - 1]) out[g->n - 1] = malloc(sizeof(float) * (size_t)M.V);
    eval(&r, toks, 0, g->n, out);
    for (int k = 0; k < g->nchecks; k++) {
      float *lg = out[g->pos[k]];
      for (int t = 0; t < 20; t++) {
        double d = fabs(lg[g->top_id[k][t]] - g->top_logit[k][t]);
        if (d > maxerr) maxerr = d;
      }
      ntop++;
      top1 += argmax(lg, M.V) == g->top_id[k][0];
    }
    /* greedy: argmax continuation, one decode step per token */
    float *lg = malloc(sizeof(float) * (size_t)M.V);
    memcpy(lg, out[g->n - 1], sizeof(float) * (size_t)M.V);
    int first_bad = -1;
    for (int k = 0; k < g->ngreedy; k++) {
      int next = argmax(lg, M.V);
      if (next == g->greedy[k]) greedy_ok++;
      else if (first_bad < 0) first_bad = k;
      greedy_n++;
      if (first_bad >= 0) break; /* diverged: the rest is not comparable */
      if (k + 1 < g->ngreedy) decode_step(&r, next, g->n + k, lg);
      tokens_run++;
    }
    tokens_run += g->n;
    if (first_bad >= 0 && g->margin[first_bad] > diverge_margin) diverge_margin = g->margin[first_bad];
    if (first_bad >= 0)
      snprintf(detail + strlen(detail), sizeof detail - strlen(detail), " [%s: greedy diverges at step %d, golden margin %.4g]",
               g->name, first_bad, g->margin[first_bad]);
    if (exact) CHECK(first_bad < 0, "%s/%s: greedy token %d differs", name, g->name, first_bad);
    free(lg);
    for (int i = 0; i < total; i++) free(out[i]);
    free(out);
    free(toks);
  }
  double dt = now_s() - t0;
  printf("%-34s max|dlogit| top20 %.3g, top1 %d/%d, greedy %d/%d, %.0f tokens/s%s\n", name, maxerr, top1, ntop, greedy_ok,
         greedy_n, tokens_run / dt, detail);
  if (exact) {
    CHECK(maxerr < 2e-4, "%s: logit error %g", name, maxerr);
    CHECK(top1 == ntop, "%s: top1 %d/%d", name, top1, ntop);
  } else {
    /* a sanity bound only (int8 error grows with the shape); the margin check below is the real one */
    CHECK(maxerr < 1.0, "%s: logit error %g unreasonably large", name, maxerr);
    /* SPEC: a 16-bit/8-bit path may only diverge where the golden top-1 margin is within its error */
    CHECK(diverge_margin <= 2 * maxerr, "%s: greedy diverged at a golden margin %g above 2x the logit error %g", name,
          diverge_margin, maxerr);
  }
  close_runner(&r);
}

/* u16_codes checks that u16 mask codes are dequantised like a real graph: codes a host might write by
 * mistake (32768 to attend, 32767 to block) must not pass the golden cases, and a code that is neither
 * attend nor blocked (65531 = -4 with scale 1, offset -65535, written where the mask blocks) changes the result. */
static void u16_codes(const char *dir, const char *body, const char *lmfile, void *backend, void *device) {
  runner r;
  memset(&r, 0, sizeof r);
  open_runner(&r, dir, body, lmfile, backend, device);
  CHECK(!r.additive, "%s: not a u16 mask", body);
  gcase *g = &cases[0];
  struct { uint16_t open, blocked; double err; } codes[] = {{65535, 0, 0}, {65535, 65531, 0}, {32768, 32767, 0}};
  float *base = malloc(sizeof(float) * (size_t)M.V);
  double diff[3] = {0};
  for (int c = 0; c < 3; c++) {
    u16_open = codes[c].open;
    u16_blocked = codes[c].blocked;
    float **out = calloc((size_t)g->n, sizeof(float *));
    for (int k = 0; k < g->nchecks; k++) out[g->pos[k]] = malloc(sizeof(float) * (size_t)M.V);
    if (!out[g->n - 1]) out[g->n - 1] = malloc(sizeof(float) * (size_t)M.V);
    eval(&r, g->prompt, 0, g->n, out);
    for (int k = 0; k < g->nchecks; k++)
      for (int t = 0; t < 20; t++) {
        double d = fabs(out[g->pos[k]][g->top_id[k][t]] - g->top_logit[k][t]);
        if (isnan(d)) d = INFINITY; /* a row whose mask opens nothing is padding: poisoned (NaN) */
        if (d > codes[c].err) codes[c].err = d;
      }
    if (c == 0) memcpy(base, out[g->n - 1], sizeof(float) * (size_t)M.V);
    for (int v = 0; v < M.V; v++) {
      double d = fabs(out[g->n - 1][v] - base[v]);
      if (isnan(d)) d = INFINITY;
      if (d > diff[c]) diff[c] = d;
    }
    for (int i = 0; i < g->n; i++) free(out[i]);
    free(out);
  }
  u16_open = 65535;
  u16_blocked = 0;
  printf("u16 mask codes: golden error %.3g with 65535/0, %.3g with 32768/32767, %.3g with 65535/65531 (max change %.3g)\n",
         codes[0].err, codes[2].err, codes[1].err, diff[1]);
  CHECK(codes[0].err < 2e-4, "u16 codes 65535/0: golden error %g", codes[0].err);
  CHECK(codes[2].err > 1e-2, "u16 codes 32768/32767 still pass the golden case (error %g)", codes[2].err);
  CHECK(diff[1] > 1e-2, "u16 code 65531 (-4) in blocked places did not change the logits (max change %g)", diff[1]);
  free(base);
  close_runner(&r);
}

/* ---- concurrency: several threads executing graphs of one context at once ---- */
typedef struct {
  runner *r;
  graph g; /* private copy of the decode graph's tensors with private buffers */
  float *first;
  int ok;
} conc_arg;

static void *conc_thread(void *p) {
  conc_arg *a = p;
  a->ok = 1;
  for (int k = 0; k < 30; k++) {
    E e = execute(&a->g);
    int iy = find(a->g.out, a->g.nout, "y");
    if (e) { a->ok = 0; break; }
    for (int h = 0; h < M.H; h++)
      if (get(&a->g.out[iy], a->g.outbuf[iy], (size_t)h) != a->first[h]) a->ok = 0;
  }
  return NULL;
}

static void concurrency(runner *r) {
  graph *d = &r->dec;
  decode_step(r, 3, 5, NULL);
  int iy = find(d->out, d->nout, "y");
  float *first = malloc(sizeof(float) * (size_t)M.H);
  for (int h = 0; h < M.H; h++) first[h] = get(&d->out[iy], d->outbuf[iy], (size_t)h);
  conc_arg args[3];
  pthread_t th[3];
  for (int t = 0; t < 3; t++) {
    args[t].r = r;
    args[t].first = first;
    args[t].g = *d;
    args[t].g.out = malloc(sizeof(Qnn_Tensor_t) * d->nout);
    args[t].g.outbuf = malloc(sizeof(void *) * d->nout);
    memcpy(args[t].g.out, d->out, sizeof(Qnn_Tensor_t) * d->nout);
    for (uint32_t i = 0; i < d->nout; i++) {
      args[t].g.outbuf[i] = calloc(1, nbytes(&d->out[i]));
      bind_raw(&args[t].g.out[i], args[t].g.outbuf[i]);
    }
    pthread_create(&th[t], NULL, conc_thread, &args[t]);
  }
  for (int t = 0; t < 3; t++) {
    pthread_join(th[t], NULL);
    CHECK(args[t].ok, "concurrent executes in thread %d gave other results", t);
    for (uint32_t i = 0; i < d->nout; i++) free(args[t].g.outbuf[i]);
    free(args[t].g.out);
    free(args[t].g.outbuf);
  }
  free(first);
}

/* ---- validation and switches ---- */
typedef struct {
  int64_t live_backends, live_devices, live_contexts, live_mems, live_logs, live_power_ids;
  int64_t exec_calls, exec_prefill, exec_decode, exec_lmhead, exec_failed, exec_injected;
} stats_t;
static int (*p_stats)(stats_t *);
static int (*p_set)(const char *, const char *);
static void (*p_reset)(void);

static void validation(const char *dir, const char *body, const char *lmfile, void *backend, void *device) {
  runner r;
  memset(&r, 0, sizeof r);
  open_runner(&r, dir, body, lmfile, backend, device);
  graph *g = &r.dec;
  exec_t ex = FN(T, SLOT_graphExecute, exec_t);
  /* a valid call first */
  decode_step(&r, 1, 0, NULL);
  E e;
  e = ex(g->handle, g->in, g->nin - 1, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_ARGUMENT, "count: %llu", (unsigned long long)e);
  e = ex(g->handle, g->in, g->nin, g->out, g->nout + 1, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_ARGUMENT, "out count: %llu", (unsigned long long)e);
  Qnn_Tensor_t save = g->in[0];
  g->in[0].v2.id = 999999;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "bad id: %llu", (unsigned long long)e);
  CHECK(strstr(errtext(e), "unknown tensor id") != NULL, "message: %s", errtext(e));
  g->in[0] = save;
  g->in[0].v2.name = "nope";
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR && strstr(errtext(e), "nope"), "bad name: %llu %s", (unsigned long long)e, errtext(e));
  g->in[0] = save;
  g->in[0].v2.dataType = QNN_DATATYPE_INT_32;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "bad dtype: %llu", (unsigned long long)e);
  g->in[0] = save;
  g->in[0].v2.type = QNN_TENSOR_TYPE_APP_READ;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "bad type: %llu", (unsigned long long)e);
  g->in[0] = save;
  uint32_t dims[4] = {2, (uint32_t)M.H};
  g->in[0].v2.dimensions = dims;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR && strstr(errtext(e), "dimension"), "bad dims: %llu %s", (unsigned long long)e, errtext(e));
  g->in[0] = save;
  g->in[0].v2.rank = 3;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "bad rank: %llu", (unsigned long long)e);
  g->in[0] = save;
  g->in[0].v2.clientBuf.dataSize -= 1;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "small buffer: %llu", (unsigned long long)e);
  g->in[0] = save;
  g->in[0].v2.memType = QNN_TENSORMEMTYPE_MEMHANDLE;
  g->in[0].v2.memHandle = (void *)&save;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "bogus memhandle: %llu", (unsigned long long)e);
  g->in[0] = save;
  Qnn_Tensor_t t1 = g->in[1];
  g->in[1] = g->in[0];
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "duplicate: %llu", (unsigned long long)e);
  g->in[1] = t1;
  e = ex((void *)&save, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_HANDLE, "bad graph: %llu", (unsigned long long)e);
  /* a V1 tensor with the same prefix is accepted */
  g->in[0].version = 1;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == 0, "v1 tensor: %llu %s", (unsigned long long)e, errtext(e));
  g->in[0] = save;
  void *gh = NULL;
  e = FN(T, SLOT_graphRetrieve, retrieve_t)(r.ctx_body, "nope", &gh);
  CHECK(e == QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST, "retrieve unknown: %llu", (unsigned long long)e);
  e = FN(T, SLOT_deviceFree, h_t)(device);
  CHECK(e == QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT, "deviceFree busy: %llu", (unsigned long long)e);
  /* codes as the headers document them */
  e = FN(T, SLOT_graphRetrieve, retrieve_t)((void *)&save, "decode", &gh);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_HANDLE, "retrieve with a bad context: %llu", (unsigned long long)e);
  e = FN(T, SLOT_graphRetrieve, retrieve_t)(r.ctx_body, "decode", NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_NAME, "retrieve with a NULL out: %llu", (unsigned long long)e);
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, (void *)&save);
  CHECK(e == QNN_COMMON_ERROR_NOT_SUPPORTED, "execute with a signal: %llu", (unsigned long long)e);
  /* what the headers allow: NULL input dimensions, APP_READWRITE and OPTIONAL_APP_* tensors */
  g->in[0].v2.dimensions = NULL;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == 0, "NULL input dimensions: %llu %s", (unsigned long long)e, errtext(e));
  g->in[0] = save;
  Qnn_Tensor_t osave = g->out[0];
  g->out[0].v2.dimensions = NULL;
  e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "NULL output dimensions: %llu", (unsigned long long)e);
  g->out[0] = osave;
  struct { uint32_t type; int input; E want; } types[] = {
      {QNN_TENSOR_TYPE_APP_READWRITE, 1, 0}, {QNN_TENSOR_TYPE_OPTIONAL_APP_WRITE, 1, 0},
      {QNN_TENSOR_TYPE_OPTIONAL_APP_READWRITE, 1, 0}, {QNN_TENSOR_TYPE_APP_READWRITE, 0, 0},
      {QNN_TENSOR_TYPE_OPTIONAL_APP_READ, 0, 0}, {QNN_TENSOR_TYPE_OPTIONAL_APP_READWRITE, 0, 0},
      {QNN_TENSOR_TYPE_OPTIONAL_APP_READ, 1, QNN_GRAPH_ERROR_INVALID_TENSOR},
      {QNN_TENSOR_TYPE_OPTIONAL_APP_WRITE, 0, QNN_GRAPH_ERROR_INVALID_TENSOR},
      {QNN_TENSOR_TYPE_NATIVE, 1, QNN_GRAPH_ERROR_INVALID_TENSOR}, {8 /* UPDATEABLE_APP_WRITE */, 1, QNN_GRAPH_ERROR_INVALID_TENSOR},
  };
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    Qnn_Tensor_t *t = types[k].input ? &g->in[0] : &g->out[0];
    t->v2.type = types[k].type;
    e = ex(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
    CHECK(e == types[k].want, "%s tensor type %u: %llu, want %llu", types[k].input ? "input" : "output", types[k].type,
          (unsigned long long)e, (unsigned long long)types[k].want);
    g->in[0] = save;
    g->out[0] = osave;
  }
  CHECK(FN(T, SLOT_deviceGetPlatformInfo, platinfo_t)(NULL, NULL) == QNN_COMMON_ERROR_INVALID_ARGUMENT, "platform info NULL out");
  CHECK(FN(T, SLOT_deviceGetInfrastructure, infra_t)(NULL) == QNN_COMMON_ERROR_INVALID_ARGUMENT, "infrastructure NULL out");
  /* memRegister errors */
  Qnn_MemDescriptor_t md;
  memset(&md, 0, sizeof md);
  uint32_t big[2] = {100000, 100000};
  md.memShape.numDim = 2;
  md.memShape.dimSize = big;
  md.dataType = QNN_DATATYPE_FLOAT_32;
  md.memType = QNN_MEM_TYPE_ION;
  md.ionInfo.fd = p_rpcmem_to_fd(r.rpc_block);
  void *mh;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &md, 1, &mh);
  CHECK(e == QNN_MEM_ERROR_INVALID_SHAPE, "oversized register: %llu", (unsigned long long)e);
  /* one registration kind per allocation: the KV block has CUSTOM registrations, so ION on it is 8002 */
  big[0] = big[1] = 1;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &md, 1, &mh);
  CHECK(e == QNN_MEM_ERROR_ALREADY_REGISTERED, "ION beside CUSTOM registrations: %llu", (unsigned long long)e);
  void *own = p_rpcmem_alloc(25, 1, 64); /* a block of its own for the ION cases below */
  md.ionInfo.fd = p_rpcmem_to_fd(own);
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &md, 1, &mh);
  CHECK(e == 0, "ION register: %llu", (unsigned long long)e);
  void *mh2;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &md, 1, &mh2);
  CHECK(e == QNN_MEM_ERROR_ALREADY_REGISTERED, "ION twice: %llu", (unsigned long long)e);
  int dupfd = dup(md.ionInfo.fd), ownfd = md.ionInfo.fd; /* another fd of the same allocation */
  md.ionInfo.fd = dupfd;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &md, 1, &mh2);
  CHECK(e == QNN_MEM_ERROR_ALREADY_REGISTERED, "ION twice through a dup'd fd: %llu", (unsigned long long)e);
  close(dupfd);
  md.ionInfo.fd = ownfd;
  QnnMemHtp_Descriptor_t ohd = {.type = QNN_HTP_MEM_SHARED_BUFFER, .size = 64};
  ohd.sharedBufferConfig.fd = md.ionInfo.fd;
  Qnn_MemDescriptor_t cmd = md;
  cmd.memType = QNN_MEM_TYPE_CUSTOM;
  cmd.customInfo = &ohd;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &cmd, 1, &mh2);
  CHECK(e == QNN_MEM_ERROR_ALREADY_REGISTERED, "CUSTOM beside ION: %llu", (unsigned long long)e);
  CHECK(FN(T, SLOT_memDeRegister, memdereg_t)(&mh, 1) == 0, "deregister ION");
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &cmd, 1, &mh2);
  CHECK(e == 0, "CUSTOM after the ION one is gone: %llu", (unsigned long long)e);
  void *mh3;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &cmd, 1, &mh3);
  CHECK(e == QNN_MEM_ERROR_ALREADY_REGISTERED, "CUSTOM duplicate: %llu", (unsigned long long)e);
  ohd.size = 1 << 20;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &cmd, 1, &mh3);
  CHECK(e == QNN_MEM_ERROR_INVALID_SHAPE, "CUSTOM size beyond the fd: %llu", (unsigned long long)e);
  CHECK(FN(T, SLOT_memDeRegister, memdereg_t)(&mh2, 1) == 0, "deregister CUSTOM");
  md.ionInfo.fd = p_rpcmem_to_fd(r.rpc_block);
  md.ionInfo.fd = -1;
  big[0] = big[1] = 1;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &md, 1, &mh);
  CHECK(e == QNN_MEM_ERROR_MAPPING, "bad fd: %llu", (unsigned long long)e);
  md.memType = 7;
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, &md, 1, &mh);
  CHECK(e == QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE, "bad memtype: %llu", (unsigned long long)e);
  void *bogus = &md;
  e = FN(T, SLOT_memDeRegister, memdereg_t)(&bogus, 1);
  CHECK(e == QNN_MEM_ERROR_INVALID_HANDLE, "bad dereg: %llu", (unsigned long long)e);
  /* a failing memRegister sets every handle to NULL (the first descriptor is valid, the second is not) */
  Qnn_MemDescriptor_t two[2];
  uint32_t one = 1;
  memset(two, 0, sizeof two);
  two[0].memShape.numDim = 1;
  two[0].memShape.dimSize = &one;
  two[0].dataType = QNN_DATATYPE_FLOAT_32;
  two[0].memType = QNN_MEM_TYPE_ION;
  two[0].ionInfo.fd = p_rpcmem_to_fd(own);
  two[1] = two[0];
  two[1].memType = 7;
  stats_t sm0, sm1;
  p_stats(&sm0);
  void *hs2[2] = {(void *)&md, (void *)&md};
  e = FN(T, SLOT_memRegister, memreg_t)(r.ctx_body, two, 2, hs2);
  p_stats(&sm1);
  CHECK(e == QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE && !hs2[0] && !hs2[1] && sm1.live_mems == sm0.live_mems,
        "failed memRegister: %llu, handles %p %p, live %lld -> %lld", (unsigned long long)e, hs2[0], hs2[1],
        (long long)sm0.live_mems, (long long)sm1.live_mems);
  hs2[0] = hs2[1] = (void *)&md;
  e = FN(T, SLOT_memRegister, memreg_t)((void *)&md, two, 1, hs2);
  CHECK(e == QNN_MEM_ERROR_INVALID_HANDLE && !hs2[0], "memRegister with a bad context: %llu %p", (unsigned long long)e, hs2[0]);
  p_rpcmem_free(own);

  /* switches: injected failure, script, latency */
  stats_t s0, s1;
  p_reset();
  p_stats(&s0);
  CHECK(s0.exec_calls == 0, "reset");
  p_set("HOSTSIM_FAIL_EXECUTE_AT", "2,4");
  decode_step(&r, 1, 0, NULL);
  e = execute(g);
  CHECK(e == QNN_COMMON_ERROR_SYSTEM_COMMUNICATION, "injected: %llu", (unsigned long long)e);
  CHECK(execute(g) == 0, "third call ok");
  p_set("HOSTSIM_FAIL_CODE", "1011");
  CHECK(execute(g) == QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL, "injected fatal");
  p_set("HOSTSIM_FAIL_EXECUTE_AT", NULL);
  p_set("HOSTSIM_FAIL_CODE", NULL);
  p_stats(&s1);
  CHECK(s1.exec_calls == 4 && s1.exec_injected == 2 && s1.exec_decode == 2, "stats: calls %lld injected %lld decode %lld",
        (long long)s1.exec_calls, (long long)s1.exec_injected, (long long)s1.exec_decode);
  char spath[1024];
  snprintf(spath, sizeof spath, "%s/script.txt", dir);
  FILE *sf = fopen(spath, "w");
  /* ids valid in any vocabulary (held-out models may have fewer than 128,010 tokens) */
  int eot = M.V > 128009 ? 128009 : M.V - 1, a = 7 % M.V, b = 42 % M.V;
  fprintf(sf, "%d %d\n%d\n", a, eot, b);
  fclose(sf);
  p_set("HOSTSIM_SCRIPT", spath);
  float *lg = malloc(sizeof(float) * (size_t)M.V);
  int want[5] = {a, eot, b, a, eot};
  for (int k = 0; k < 5; k++) {
    lm(&r, &r.dec, 0, lg);
    CHECK(argmax(lg, M.V) == want[k], "script call %d: argmax %d want %d", k, argmax(lg, M.V), want[k]);
  }
  p_set("HOSTSIM_SCRIPT", NULL);
  p_set("HOSTSIM_LATENCY_US_LMHEAD", "30000");
  double t0 = now_s();
  lm(&r, &r.dec, 0, lg);
  double dt = now_s() - t0;
  CHECK(dt >= 0.030, "latency %.4f s", dt);
  p_set("HOSTSIM_LATENCY_US_LMHEAD", NULL);
  free(lg);
  concurrency(&r);
  /* speed: decode steps (no lm-head), lm-head calls, full prefill windows */
  int nb = 200;
  t0 = now_s();
  for (int k = 0; k < nb; k++) decode_step(&r, k + 5, k % M.CTX, NULL);
  double td = (now_s() - t0) / nb;
  float *lg2 = malloc(sizeof(float) * (size_t)M.V);
  t0 = now_s();
  for (int k = 0; k < 50; k++) lm(&r, &r.dec, 0, lg2);
  double tl = (now_s() - t0) / 50;
  free(lg2);
  int *toks = calloc((size_t)r.W, sizeof(int));
  float **outs = calloc((size_t)r.W, sizeof(float *));
  t0 = now_s();
  for (int k = 0; k < 10; k++) eval(&r, toks, 0, r.W, outs);
  double tp = (now_s() - t0) / 10;
  printf("speed (%s): decode %.1f us/step, lm-head %.1f us/call, prefill window of %d rows %.1f us (%.0f rows/s)\n", body,
         td * 1e6, tl * 1e6, r.W, tp * 1e6, r.W / tp);
  free(toks);
  free(outs);
  close_runner(&r);
}

/* smoke loads BODY + LMHEAD (any shape), prefills a short prompt and decodes a few tokens, with timings. */
static int smoke(const char *dir, const char *body, const char *lmfile, void *backend, void *device) {
  uint64_t sz;
  graph gs[4];
  memset(gs, 0, sizeof gs);
  void *buf = read_in(dir, body, &sz);
  load_graphs(buf, sz, gs, 4);
  free(buf);
  graph *d = !strcmp(gs[0].name, "decode") ? &gs[0] : &gs[1];
  M.H = (int)d->in[find(d->in, d->nin, "x")].v2.dimensions[1];
  M.D = (int)d->in[find(d->in, d->nin, "cos")].v2.dimensions[1];
  const Qnn_Tensor_t *pk = &d->in[find(d->in, d->nin, "past_k_0")];
  M.CTX = (int)pk->v2.dimensions[0];
  M.kvh = (int)pk->v2.dimensions[1] / M.D;
  M.L = (int)(d->nout - 1) / 2;
  for (int i = 0; i < M.D / 2; i++) M.inv[i] = pow(500000.0, -2.0 * i / M.D);
  buf = read_in(dir, lmfile, &sz);
  graph lg[2];
  memset(lg, 0, sizeof lg);
  load_graphs(buf, sz, lg, 2);
  free(buf);
  M.V = (int)lg[0].out[0].v2.dimensions[1];
  printf("smoke: H %d L %d D %d kv_heads %d CTX %d V %d\n", M.H, M.L, M.D, M.kvh, M.CTX, M.V);
  runner r;
  memset(&r, 0, sizeof r);
  double t0 = now_s();
  open_runner(&r, dir, body, lmfile, backend, device);
  printf("smoke: contexts loaded in %.2f s\n", now_s() - t0);
  int toks[64] = {128000, 9906, 11, 1917, 0, 791, 3938, 374};
  float **out = calloc(64, sizeof(float *));
  out[7] = malloc(sizeof(float) * (size_t)M.V);
  t0 = now_s();
  eval(&r, toks, 0, 8, out);
  printf("smoke: prefill (window %d) + lm-head %.2f s\n", r.W, now_s() - t0);
  int next = argmax(out[7], M.V);
  printf("smoke: tokens %d", next);
  t0 = now_s();
  for (int k = 0; k < 4; k++) {
    decode_step(&r, next, 8 + k, out[7]);
    next = argmax(out[7], M.V);
    printf(" %d", next);
  }
  printf("\nsmoke: %.3f s per decode step + lm-head\n", (now_s() - t0) / 4);
  close_runner(&r);
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}

/* ---- ExecuTorch static-llama graphs (FORMAT.md "ExecuTorch graphs") ---- */
/* et_node returns the <node> of input_<k>_<node>@0 (static buffer). */
static const char *et_node(const char *name) {
  static char buf[64];
  const char *p = strchr(name + 6, '_');
  snprintf(buf, sizeof buf, "%s", p ? p + 1 : "");
  char *at = strchr(buf, '@');
  if (at) *at = 0;
  return buf;
}

/* et_call runs graph g (float32 KV, logits and mask) for n real tokens at positions npast..,
 * with caches kc/vc [L][n_kv·hd·CL] indexed by absolute slot; returns the logits of row n-1. */
static E et_call(graph *g, const int *tok, int n, int npast, float **kc, float **vc, float *logits) {
  int im = -1;
  for (uint32_t i = 0; i < g->nin; i++)
    if (!strcmp(et_node(g->in[i].v2.name), "atten_mask")) im = (int)i;
  int AR = (int)g->in[im].v2.dimensions[2], CL = (int)g->in[im].v2.dimensions[3], S = CL - AR;
  int L = (int)(g->nout - 1) / 2, nkv = M.kvh, hd = M.D;
  for (uint32_t i = 0; i < g->nin; i++) {
    const char *nd = et_node(g->in[i].v2.name);
    void *b = g->inbuf[i];
    if (!strcmp(nd, "tokens") || !strcmp(nd, "input_pos"))
      for (int r = 0; r < AR; r++) ((int32_t *)b)[r] = !strcmp(nd, "input_pos") ? npast + r : r < n ? tok[r] : 0;
    else if (i == (uint32_t)im)
      for (int r = 0; r < AR; r++)
        for (int j = 0; j < CL; j++) ((float *)b)[r * CL + j] = (j < npast || (j >= S && j - S <= r)) ? 0.0f : -65535.0f;
    else {
      int j = atoi(nd + 5);
      float *dst = b;
      if (j < L)
        for (int r = 0; r < nkv * hd; r++) memcpy(dst + (size_t)r * S, kc[j] + (size_t)r * CL, sizeof(float) * (size_t)S);
      else
        for (int h = 0; h < nkv; h++) memcpy(dst + (size_t)h * S * hd, vc[j - L] + (size_t)h * CL * hd, sizeof(float) * (size_t)S * hd);
    }
  }
  E e = FN(T, SLOT_graphExecute, exec_t)(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  if (e) return e;
  for (int l = 0; l < L; l++) {
    const float *vo = g->outbuf[2 * l], *ko = g->outbuf[2 * l + 1];
    for (int r = 0; r < nkv * hd; r++) memcpy(kc[l] + (size_t)r * CL + npast, ko + (size_t)r * AR, sizeof(float) * (size_t)n);
    for (int h = 0; h < nkv; h++)
      memcpy(vc[l] + ((size_t)h * CL + npast) * hd, vo + (size_t)h * AR * hd, sizeof(float) * (size_t)n * hd);
  }
  memcpy(logits, (const float *)g->outbuf[2 * L] + (size_t)(n - 1) * M.V, sizeof(float) * (size_t)M.V);
  return 0;
}

/* et_smoke runs the short golden case through et_f32.hsim: a two-chunk prefill (AR 4, the
 * second chunk padded), then kv_forward greedy steps that must equal the golden tokens; plus
 * the strict checks on a short buffer and an out-of-range position. */
static void et_smoke(const char *dir, void *backend, void *device) {
  char path[1024];
  uint64_t sz;
  snprintf(path, sizeof path, "%s/et_f32.hsim", dir);
  void *bin = read_file(path, &sz);
  graph gs[2];
  memset(gs, 0, sizeof gs);
  CHECK(load_graphs(bin, sz, gs, 2) == 2 && !strcmp(gs[0].name, "kv_forward") && !strcmp(gs[1].name, "prefill_forward"),
        "ExecuTorch graphs: %s, %s", gs[0].name, gs[1].name);
  CHECK(!strcmp(gs[1].in[0].v2.name, "input_2_args_0@0") && gs[1].in[0].v2.rank == 4 && gs[1].in[0].v2.dimensions[3] == 60,
        "stored order starts with K0 [1,n_kv,hd,60]: %s", gs[1].in[0].v2.name);
  void *ctx = NULL;
  CHECK(FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, NULL, bin, sz, &ctx, NULL) == 0, "ExecuTorch context");
  /* the spill-fill group of sharded exports: REGISTER_MULTI_CONTEXTS {firstGroupHandle, maxSpillFillBuffer} */
  struct { uint32_t option, pad; void *first; uint64_t spill_fill; } grp = {2, 0, NULL, 1 << 20};
  QnnContext_Config_t gcfg = {.option = 0, .customConfig = &grp};
  const QnnContext_Config_t *glist[] = {&gcfg, NULL};
  void *g1 = NULL, *g2 = NULL, *g3 = NULL;
  CHECK(FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, (const void **)glist, bin, sz, &g1, NULL) == 0, "group: first context");
  grp.first = g1;
  CHECK(FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, (const void **)glist, bin, sz, &g2, NULL) == 0, "group: second context");
  grp.first = &grp;
  E ge = FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, (const void **)glist, bin, sz, &g3, NULL);
  CHECK(ge == QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "group with a bogus first handle: %llu", (unsigned long long)ge);
  CHECK(FN(T, SLOT_contextFree, ctxfree_t)(g2, NULL) == 0 && FN(T, SLOT_contextFree, ctxfree_t)(g1, NULL) == 0, "group contexts freed");
  free(bin);
  for (int i = 0; i < 2; i++) {
    CHECK(FN(T, SLOT_graphRetrieve, retrieve_t)(ctx, gs[i].name, &gs[i].handle) == 0, "retrieve %s", gs[i].name);
    alloc_io(&gs[i]);
  }
  int L = M.L, CL = 64;
  float *kc[64], *vc[64], *logits = malloc(sizeof(float) * (size_t)M.V);
  for (int l = 0; l < L; l++) {
    kc[l] = calloc((size_t)M.kvh * M.D * CL, sizeof(float));
    vc[l] = calloc((size_t)M.kvh * M.D * CL, sizeof(float));
  }
  stats_t s0, s1;
  p_stats(&s0);
  gcase *c = &cases[0];
  int pos = 0;
  E e = 0;
  for (; pos < c->n && !e; pos += 4) e = et_call(&gs[1], c->prompt + pos, c->n - pos < 4 ? c->n - pos : 4, pos, kc, vc, logits);
  CHECK(e == 0, "prefill_forward: %s", errtext(e));
  pos = c->n;
  int steps = 8, ok = 0;
  for (int k = 0; k < steps && !e; k++) {
    int tok = argmax(logits, M.V);
    ok += tok == c->greedy[k];
    CHECK(tok == c->greedy[k], "ExecuTorch greedy step %d: %d, golden %d", k, tok, c->greedy[k]);
    e = et_call(&gs[0], &tok, 1, pos++, kc, vc, logits);
  }
  CHECK(e == 0 && ok == steps, "kv_forward: %s, %d/%d greedy tokens", errtext(e), ok, steps);
  p_stats(&s1);
  CHECK(s1.exec_prefill - s0.exec_prefill == 2 && s1.exec_decode - s0.exec_decode == steps, "ExecuTorch executes counted as prefill %lld decode %lld",
        (long long)(s1.exec_prefill - s0.exec_prefill), (long long)(s1.exec_decode - s0.exec_decode));
  /* the decode latency floor applies to kv_forward (one shard: the whole floor) */
  p_set("HOSTSIM_LATENCY_US_DECODE", "30000");
  double t0 = now_s();
  int t1 = 1;
  e = et_call(&gs[0], &t1, 1, pos, kc, vc, logits);
  double dt = now_s() - t0;
  CHECK(e == 0 && dt >= 0.030, "kv_forward latency floor: %.4f s", dt);
  p_set("HOSTSIM_LATENCY_US_DECODE", NULL);
  /* strictness: a buffer one element short, a position outside the context */
  graph *g = &gs[0];
  g->in[0].v2.clientBuf.dataSize -= 4;
  e = FN(T, SLOT_graphExecute, exec_t)(g->handle, g->in, g->nin, g->out, g->nout, NULL, NULL);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR, "short ExecuTorch buffer: %llu", (unsigned long long)e);
  g->in[0].v2.clientBuf.dataSize += 4;
  int tok = 1;
  e = et_call(g, &tok, 1, CL, kc, vc, logits);
  CHECK(e == QNN_GRAPH_ERROR_INVALID_TENSOR && strstr(errtext(e), "input_pos"), "input_pos = CL: %llu %s", (unsigned long long)e, errtext(e));
  printf("executorch: %d/%d greedy tokens of case %s\n", ok, steps, c->name);
  for (int l = 0; l < L; l++) { free(kc[l]); free(vc[l]); }
  free(logits);
  for (int i = 0; i < 2; i++) free_graph(&gs[i]);
  CHECK(FN(T, SLOT_contextFree, ctxfree_t)(ctx, NULL) == 0, "ExecuTorch contextFree");
}

int main(int argc, char **argv) {
  if (argc != 3 && !(argc == 6 && !strcmp(argv[3], "smoke"))) {
    fprintf(stderr, "usage: harness LIBDIR DATADIR | harness LIBDIR DIR smoke BODY.hsim LMHEAD.hsim\n");
    return 2;
  }
  const char *libdir = argv[1], *dir = argv[2];
  char path[1024];
  snprintf(path, sizeof path, "%s/libQnnHtp.so", libdir);
  void *htp = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  snprintf(path, sizeof path, "%s/libQnnSystem.so", libdir);
  void *sys = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  snprintf(path, sizeof path, "%s/libcdsprpc.so", libdir);
  void *rpc = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!htp || !sys || !rpc) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  p_rpcmem_alloc = dlsym(rpc, "rpcmem_alloc");
  p_rpcmem_free = dlsym(rpc, "rpcmem_free");
  p_rpcmem_to_fd = dlsym(rpc, "rpcmem_to_fd");
  p_stats = dlsym(htp, "hostsim_stats");
  p_set = dlsym(htp, "hostsim_set");
  p_reset = dlsym(htp, "hostsim_reset");
  int64_t (*rpc_live)(void) = dlsym(rpc, "hostsim_rpcmem_live");
  int64_t (*sys_live)(void) = dlsym(sys, "hostsim_system_live");
  int (*power)(uint32_t, uint32_t *) = dlsym(htp, "hostsim_power_config");

  const QnnInterface_t **prov;
  uint32_t np;
  CHECK(((getprov_t)dlsym(htp, "QnnInterface_getProviders"))((const void ***)&prov, &np) == 0 && np == 1, "getProviders");
  const QnnInterface_t *qi = prov[0];
  CHECK(qi->backendId == 6 && !strcmp(qi->providerName, "HTP_QTI_AISW") && qi->apiVersion.coreApiVersion.minor == 32 &&
            qi->apiVersion.backendApiVersion.minor == 43, "provider");
  for (int i = 0; i < HOSTSIM_QNN_TABLE_SLOTS; i++) CHECK(qi->table[i] != NULL, "slot %d NULL", i);
  T = (void **)qi->table;
  CHECK(((E(*)(void *, void *, void *, void *))T[5])(NULL, NULL, NULL, NULL) == 1000, "unimplemented slot returns 1000");
  const QnnSystemInterface_t **sprov;
  CHECK(((getprov_t)dlsym(sys, "QnnSystemInterface_getProviders"))((const void ***)&sprov, &np) == 0 && np == 1, "sys providers");
  CHECK(sprov[0]->systemApiVersion.major == 1 && sprov[0]->systemApiVersion.minor == 7, "sys version");
  ST = (void **)sprov[0]->table;

  void *log = NULL, *backend = NULL, *device = NULL;
  CHECK(FN(T, SLOT_logCreate, logcreate_t)(log_cb, 3, &log) == 0, "logCreate");
  E be;
  int junk_log;
  be = FN(T, SLOT_backendCreate, backendcreate_t)(&junk_log, NULL, &backend);
  CHECK(be == QNN_BACKEND_ERROR_INVALID_HANDLE, "backendCreate with a bad log: %llu", (unsigned long long)be);
  QnnBackend_Config_t bcfg = {.option = 5};
  const QnnBackend_Config_t *bcl[] = {&bcfg, NULL};
  be = FN(T, SLOT_backendCreate, backendcreate_t)(log, (const void **)bcl, &backend);
  CHECK(be == QNN_BACKEND_ERROR_INVALID_CONFIG, "backendCreate with an unknown option: %llu", (unsigned long long)be);
  CHECK(FN(T, SLOT_backendCreate, backendcreate_t)(log, NULL, &backend) == 0, "backendCreate");
  CHECK(log_count >= 1, "log callback called (%d)", log_count);
  CHECK(((E(*)(uint32_t))T[SLOT_propertyHasCapability])(1501) == 0, "device capability");
  QnnHtpDevice_CustomConfig_t bad = {.option = QNN_HTP_DEVICE_CONFIG_OPTION_ARCH, .arch = {0, 75}};
  QnnDevice_Config_t dcb = {.option = 0, .customConfig = &bad};
  const QnnDevice_Config_t *dlist_bad[] = {&dcb, NULL};
  CHECK(FN(T, SLOT_deviceCreate, devcreate_t)(log, dlist_bad, &device) == QNN_DEVICE_ERROR_INVALID_CONFIG, "arch v75 refused");
  QnnHtpDevice_CustomConfig_t badsoc = {.option = QNN_HTP_DEVICE_CONFIG_OPTION_SOC, .socModel = 57};
  dcb.customConfig = &badsoc;
  CHECK(FN(T, SLOT_deviceCreate, devcreate_t)(log, dlist_bad, &device) == QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE, "SoC 57 refused");
  CHECK(FN(T, SLOT_deviceCreate, devcreate_t)(log, NULL, NULL) == QNN_COMMON_ERROR_INVALID_ARGUMENT, "deviceCreate NULL out");
  QnnHtpDevice_CustomConfig_t arch = {.option = QNN_HTP_DEVICE_CONFIG_OPTION_ARCH, .arch = {0, 79}};
  QnnHtpDevice_CustomConfig_t soc = {.option = QNN_HTP_DEVICE_CONFIG_OPTION_SOC, .socModel = 69};
  QnnDevice_Config_t dc1 = {.option = 0, .customConfig = &arch}, dc2 = {.option = 0, .customConfig = &soc};
  const QnnDevice_Config_t *dlist[] = {&dc1, &dc2, NULL};
  CHECK(FN(T, SLOT_deviceCreate, devcreate_t)(log, dlist, &device) == 0, "deviceCreate");
  const QnnDevice_PlatformInfo_t *pi = NULL;
  CHECK(FN(T, SLOT_deviceGetPlatformInfo, platinfo_t)(log, &pi) == 0 && pi->v1.numHwDevices == 1 &&
            pi->v1.hwDevices[0].v1.deviceInfoExtension->onChipDevice.arch == 79 && pi->v1.hwDevices[0].v1.deviceInfoExtension->onChipDevice.socModel == 69,
        "platform info");
  CHECK(FN(T, SLOT_deviceFreePlatformInfo, platfree_t)(log, pi) == 0, "free platform info");
  const QnnHtpDevice_Infrastructure_t *inf = NULL;
  CHECK(FN(T, SLOT_deviceGetInfrastructure, infra_t)((const void **)&inf) == 0 && inf->infraType == 0, "infra");
  uint32_t pid = 0;
  CHECK(inf->perfInfra.createPowerConfigId(0, 0, &pid) == 0 && pid > 0, "power id");
  QnnHtpPerfInfrastructure_PowerConfig_t pc;
  memset(&pc, 0, sizeof pc);
  pc.option = QNN_HTP_PERF_CONFIG_DCVS_V3;
  pc.dcvsV3Config = (QnnHtpPerfInfrastructure_DcvsV3_t){pid, 1, 0, 0x10, 1, 40, 0, 0, 1, 0xA0, 0xA0, 0xA0, 1, 0xA0, 0xA0, 0xA0};
  QnnHtpPerfInfrastructure_PowerConfig_t lat = {.option = QNN_HTP_PERF_CONFIG_RPC_CONTROL_LATENCY, .rpcControlLatencyConfig = 100};
  QnnHtpPerfInfrastructure_PowerConfig_t pol = {.option = QNN_HTP_PERF_CONFIG_RPC_POLLING_TIME, .rpcPollingTimeConfig = 9999};
  const QnnHtpPerfInfrastructure_PowerConfig_t *pl1[] = {&pc, NULL}, *pl2[] = {&lat, &pol, NULL};
  CHECK(inf->perfInfra.setPowerConfig(pid, pl1) == 0, "setPowerConfig dcvs");
  CHECK(inf->perfInfra.setPowerConfig(pid, pl2) == 0, "setPowerConfig rpc");
  uint32_t rec[19];
  CHECK(power(pid, rec) == 0 && rec[0] == 1 && rec[1] == 2 && rec[2] == 1 && rec[3] == 0 && rec[4] == 0x10 && rec[5] == 40 &&
            rec[12] == 0xA0 && rec[13] == 100 && rec[14] == 9999,
        "recorded power config");
  CHECK(inf->perfInfra.setPowerConfig(pid + 100, pl1) != 0, "unknown power id refused");
  /* the header allows a NULL list (nothing to set), client id 0 and setMemoryConfig(NULL) */
  CHECK(inf->perfInfra.setPowerConfig(pid, NULL) == 0, "setPowerConfig NULL list");
  CHECK(power(pid, rec) == 0 && rec[1] == 2, "a NULL list changes nothing");
  CHECK(inf->perfInfra.setPowerConfig(0, pl2) == 0, "setPowerConfig client id 0");
  CHECK(power(0, rec) == 0 && rec[13] == 100, "client id 0 recorded");
  CHECK(inf->perfInfra.destroyPowerConfigId(0) == QNN_PERF_ERROR_INVALID_INPUT, "destroy id 0 (never created)");
  CHECK(inf->perfInfra.setMemoryConfig(0, 0, NULL) == 0, "setMemoryConfig NULL");

  if (argc == 6) return smoke(dir, argv[4], argv[5], backend, device);
  /* malformed binaries */
  uint64_t sz;
  snprintf(path, sizeof path, "%s/f16w_qhexrt_w16.hsim", dir);
  char *good = read_file(path, &sz);
  void *ctx = NULL;
  E e = FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, NULL, "garbage!", 8, &ctx, NULL);
  CHECK(e == QNN_CONTEXT_ERROR_CREATE_FROM_BINARY, "garbage binary: %llu", (unsigned long long)e);
  e = FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, NULL, good, sz / 2, &ctx, NULL);
  CHECK(e == QNN_CONTEXT_ERROR_CREATE_FROM_BINARY && strstr(errtext(e), "truncated"), "truncated: %llu %s", (unsigned long long)e, errtext(e));
  /* context configs: known options are accepted, unknown ones refused with INVALID_CONFIG */
  QnnContext_Config_t prio = {.option = 1, .priority = 100}, unk = {.option = 42};
  const QnnContext_Config_t *cl_ok[] = {&prio, NULL}, *cl_bad[] = {&prio, &unk, NULL};
  e = FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, (const void **)cl_bad, good, sz, &ctx, NULL);
  CHECK(e == QNN_CONTEXT_ERROR_INVALID_CONFIG, "unknown context option: %llu", (unsigned long long)e);
  e = FN(T, SLOT_contextCreateFromBinary, ctxbin_t)(backend, device, (const void **)cl_ok, good, sz, &ctx, NULL);
  CHECK(e == 0, "priority option: %llu %s", (unsigned long long)e, errtext(e));
  if (!e) CHECK(FN(T, SLOT_contextFree, ctxfree_t)(ctx, NULL) == 0, "contextFree");
  void *sh;
  FN(ST, 0, sysctx_t)(&sh);
  const QnnSystemContext_BinaryInfo_t *bi;
  uint64_t bsz;
  char junk[256] = "HSIMCTX";
  CHECK(FN(ST, 1, sysinfo_t)(sh, junk, sizeof junk, &bi, &bsz) == QNN_SYSTEM_ERROR_MALFORMED_BINARY, "system malformed");
  FN(ST, 3, h_t)(sh);
  free(good);

  snprintf(path, sizeof path, "%s/embed.f16", dir);
  M.embed = read_file(path, &sz);
  snprintf(path, sizeof path, "%s/cases.txt", dir);
  read_cases(path);

  snprintf(path, sizeof path, "%s/variants.txt", dir);
  FILE *vf = fopen(path, "r");
  char name[128], body[256], lmf[256];
  int contract, window, exact;
  int first = 1;
  while (fscanf(vf, "%127s %255s %255s %d %d %d", name, body, lmf, &contract, &window, &exact) == 6) {
    if (first) { validation(dir, body, lmf, backend, device); first = 0; }
    run_variant(dir, name, body, lmf, exact, backend, device);
    if (strstr(name, "u16mask")) u16_codes(dir, body, lmf, backend, device);
  }
  fclose(vf);
  et_smoke(dir, backend, device);

  stats_t st;
  p_stats(&st);
  CHECK(st.live_contexts == 0 && st.live_mems == 0, "leaks: contexts %lld mems %lld", (long long)st.live_contexts, (long long)st.live_mems);
  CHECK(rpc_live() == 0 && sys_live() == 0, "leaks: rpcmem %lld system %lld", (long long)rpc_live(), (long long)sys_live());
  CHECK(inf->perfInfra.destroyPowerConfigId(pid) == 0, "destroy power id");
  CHECK(FN(T, SLOT_deviceFree, h_t)(device) == 0, "deviceFree");
  CHECK(FN(T, SLOT_backendFree, h_t)(backend) == 0, "backendFree");
  CHECK(FN(T, SLOT_logFree, h_t)(log) == 0, "logFree");
  p_stats(&st);
  CHECK(st.live_backends == 0 && st.live_devices == 0 && st.live_logs == 0 && st.live_power_ids == 0, "final leaks");
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
