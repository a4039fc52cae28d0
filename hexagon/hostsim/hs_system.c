/* hs_system.c - hostsim's libQnnSystem.so: binary info (graphs and I/O tensors) of hostsim
 * context binaries through the QnnSystem interface (system API 1.7). See FORMAT.md. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_format.h"
#include "qnn_abi.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct sysctx {
  uint32_t magic;
  hs_desc d;
  int parsed;
  QnnSystemContext_BinaryInfo_t info;
  QnnSystemContext_GraphInfo_t *graphs;
  Qnn_Tensor_t *tensors;
  uint32_t *dims;
  struct sysctx *next;
} sysctx;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static sysctx *g_list;
static int64_t g_live;

EXPORT int64_t hostsim_system_live(void) {
  pthread_mutex_lock(&g_mu);
  int64_t n = g_live;
  pthread_mutex_unlock(&g_mu);
  return n;
}

static int live(sysctx *s) {
  pthread_mutex_lock(&g_mu);
  sysctx *p = g_list;
  while (p && p != s) p = p->next;
  pthread_mutex_unlock(&g_mu);
  return s && p == s;
}

static Qnn_ErrorHandle_t systemContextCreate(void **out) {
  if (!out) return QNN_SYSTEM_ERROR_INVALID_ARGUMENT;
  sysctx *s = calloc(1, sizeof *s);
  if (!s) return QNN_COMMON_ERROR_MEM_ALLOC;
  pthread_mutex_lock(&g_mu);
  s->next = g_list;
  g_list = s;
  g_live++;
  pthread_mutex_unlock(&g_mu);
  *out = s;
  return QNN_SUCCESS;
}

static void clear(sysctx *s) {
  if (s->parsed) hs_desc_free(&s->d);
  free(s->graphs);
  free(s->tensors);
  free(s->dims);
  s->graphs = NULL;
  s->tensors = NULL;
  s->dims = NULL;
  s->parsed = 0;
}

static Qnn_ErrorHandle_t systemContextFree(void *h) {
  sysctx *s = h;
  pthread_mutex_lock(&g_mu);
  sysctx **pp = &g_list;
  while (*pp && *pp != s) pp = &(*pp)->next;
  int ok = *pp != NULL;
  if (ok) { *pp = s->next; g_live--; }
  pthread_mutex_unlock(&g_mu);
  if (!ok) return QNN_SYSTEM_ERROR_INVALID_HANDLE;
  clear(s);
  free(s);
  return QNN_SUCCESS;
}

static void fill_tensor(Qnn_Tensor_t *t, const hs_tensor *src, uint32_t type, uint32_t *dims) {
  memset(t, 0, sizeof *t);
  t->version = QNN_TENSOR_VERSION_2;
  Qnn_TensorV2_t *v = &t->v2;
  v->id = src->id;
  v->name = src->name;
  v->type = type;
  v->dataFormat = 0;
  v->dataType = src->dtype;
  if ((src->dtype & 0xff00) == 0x0300 || (src->dtype & 0xff00) == 0x0400) {
    v->quantizeParams.encodingDefinition = QNN_DEFINITION_DEFINED;
    v->quantizeParams.quantizationEncoding = QNN_QUANTIZATION_ENCODING_SCALE_OFFSET;
    v->quantizeParams.scaleOffset.scale = src->scale;
    v->quantizeParams.scaleOffset.offset = src->offset;
  } else {
    v->quantizeParams.encodingDefinition = QNN_DEFINITION_UNDEFINED;
    v->quantizeParams.quantizationEncoding = QNN_QUANTIZATION_ENCODING_UNDEFINED;
  }
  v->rank = src->rank;
  memcpy(dims, src->dims, src->rank * sizeof *dims);
  v->dimensions = dims;
  v->memType = QNN_TENSORMEMTYPE_RAW;
}

static Qnn_ErrorHandle_t get_info(void *h, const void *buf, uint64_t size, const QnnSystemContext_BinaryInfo_t **out,
                                  uint64_t *outSize) {
  sysctx *s = h;
  if (!live(s)) return QNN_SYSTEM_ERROR_INVALID_HANDLE;
  if (!buf || !size || !out) return QNN_SYSTEM_ERROR_INVALID_ARGUMENT;
  clear(s);
  char err[512];
  if (hs_parse(buf, size, &s->d, err, sizeof err)) {
    fprintf(stderr, "hostsim QnnSystem: failed to interpret context binary: %s\n", err);
    return QNN_SYSTEM_ERROR_MALFORMED_BINARY;
  }
  s->parsed = 1;
  size_t nt = 0, nd = 0;
  for (uint32_t g = 0; g < s->d.ngraphs; g++) {
    const hs_graph *gr = &s->d.graphs[g];
    nt += gr->nin + gr->nout;
    for (uint32_t i = 0; i < gr->nin; i++) nd += gr->in[i].rank;
    for (uint32_t i = 0; i < gr->nout; i++) nd += gr->out[i].rank;
  }
  s->graphs = calloc(s->d.ngraphs, sizeof *s->graphs);
  s->tensors = calloc(nt + 1, sizeof *s->tensors);
  s->dims = calloc(nd + 1, sizeof *s->dims);
  if (!s->graphs || !s->tensors || !s->dims) { clear(s); return QNN_COMMON_ERROR_MEM_ALLOC; }
  Qnn_Tensor_t *t = s->tensors;
  uint32_t *dm = s->dims;
  for (uint32_t g = 0; g < s->d.ngraphs; g++) {
    const hs_graph *gr = &s->d.graphs[g];
    QnnSystemContext_GraphInfo_t *gi = &s->graphs[g];
    gi->version = 1;
    gi->v3.graphName = gr->name;
    gi->v3.numGraphInputs = gr->nin;
    gi->v3.graphInputs = t;
    for (uint32_t i = 0; i < gr->nin; i++, t++) { fill_tensor(t, &gr->in[i], QNN_TENSOR_TYPE_APP_WRITE, dm); dm += gr->in[i].rank; }
    gi->v3.numGraphOutputs = gr->nout;
    gi->v3.graphOutputs = t;
    for (uint32_t i = 0; i < gr->nout; i++, t++) { fill_tensor(t, &gr->out[i], QNN_TENSOR_TYPE_APP_READ, dm); dm += gr->out[i].rank; }
  }
  QnnSystemContext_BinaryInfo_t *bi = &s->info;
  memset(bi, 0, sizeof *bi);
  bi->version = 3;
  bi->v3.backendId = QNN_BACKEND_ID_HTP;
  bi->v3.buildId = "hostsim v1 (QAIRT 2.43.0 stand-in)";
  bi->v3.coreApiVersion = (Qnn_Version_t){2, 32, 0};
  bi->v3.backendApiVersion = (Qnn_Version_t){5, 43, 0};
  bi->v3.socVersion = "hostsim-v79";
  bi->v3.contextBlobVersion = (Qnn_Version_t){1, 0, 0};
  bi->v3.contextBlobSize = s->d.file_size;
  bi->v3.numGraphs = s->d.ngraphs;
  bi->v3.graphs = s->graphs;
  bi->v3.socModel = 69;
  *out = bi;
  if (outSize) *outSize = sizeof *bi;
  return QNN_SUCCESS;
}

static Qnn_ErrorHandle_t systemContextGetBinaryInfo(void *h, void *buf, uint64_t size,
                                                    const QnnSystemContext_BinaryInfo_t **out, uint64_t *outSize) {
  if (!outSize) return QNN_SYSTEM_ERROR_INVALID_ARGUMENT;
  return get_info(h, buf, size, out, outSize);
}
static Qnn_ErrorHandle_t systemContextGetMetaData(void *h, const void *buf, uint64_t size,
                                                  const QnnSystemContext_BinaryInfo_t **out) {
  return get_info(h, buf, size, out, NULL);
}

static Qnn_ErrorHandle_t not_supported(void) { return QNN_COMMON_ERROR_NOT_SUPPORTED; }

static QnnSystemInterface_t g_iface;
static const QnnSystemInterface_t *g_providers[1] = {&g_iface};
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void init(void) {
  g_iface.backendId = 0;
  g_iface.providerName = "SYSTEM_QTI_AISW";
  g_iface.systemApiVersion = (Qnn_Version_t){1, 7, 0};
  for (int i = 0; i < HOSTSIM_SYS_TABLE_SLOTS; i++) g_iface.table[i] = (void *)not_supported;
  g_iface.table[0] = (void *)systemContextCreate;
  g_iface.table[1] = (void *)systemContextGetBinaryInfo;
  g_iface.table[2] = (void *)systemContextGetMetaData;
  g_iface.table[3] = (void *)systemContextFree;
}

EXPORT Qnn_ErrorHandle_t QnnSystemInterface_getProviders(const QnnSystemInterface_t ***list, uint32_t *n) {
  if (!list || !n) return QNN_SYSTEM_ERROR_INVALID_ARGUMENT;
  pthread_once(&g_once, init);
  *list = g_providers;
  *n = 1;
  return QNN_SUCCESS;
}
