/* hs_htp.c - hostsim's libQnnHtp.so: the QNN core interface (QAIRT 2.43 table layout) running
 * hostsim context binaries on the CPU. See FORMAT.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hs_scratch.h"
#include "hs_format.h"
#include "hs_io.h"
#include "hs_model.h"
#include "hs_genie.h"
#include "hs_pte.h"
#include "qnn_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define BUILD_ID "hostsim v1 (QAIRT 2.43.0 stand-in)"

enum { T_LOG = 1, T_BACKEND, T_DEVICE, T_CONTEXT, T_GRAPH, T_MEM, T_PLATFORM };
enum { LOG_ERROR = 1, LOG_WARN = 2, LOG_INFO = 3, LOG_VERBOSE = 4, LOG_DEBUG = 5 };

/* ---- handle registry: every handle handed out is checked before use ---- */
typedef struct {
  void *p;
  int type;
} reg_entry;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_exec = PTHREAD_MUTEX_INITIALIZER;
static int64_t g_npu_free; /* CLOCK_MONOTONIC µs when the emulated NPU is free (v79 floors); under g_exec */
static reg_entry *g_reg;
static size_t g_nreg, g_capreg;
static int64_t g_live[8];

static int reg_add(void *p, int type) {
  if (g_nreg == g_capreg) {
    size_t nc = g_capreg ? 2 * g_capreg : 64;
    reg_entry *n = realloc(g_reg, nc * sizeof *n);
    if (!n) return -1;
    g_reg = n;
    g_capreg = nc;
  }
  g_reg[g_nreg++] = (reg_entry){p, type};
  g_live[type]++;
  return 0;
}
/* reg_add_locked is reg_add under g_mu. */
static void reg_add_locked(void *p, int type) {
  pthread_mutex_lock(&g_mu);
  reg_add(p, type);
  pthread_mutex_unlock(&g_mu);
}
static int reg_has(const void *p, int type) {
  if (!p) return 0;
  for (size_t i = 0; i < g_nreg; i++)
    if (g_reg[i].p == p && g_reg[i].type == type) return 1;
  return 0;
}
static void reg_del(const void *p, int type) {
  for (size_t i = 0; i < g_nreg; i++)
    if (g_reg[i].p == p && g_reg[i].type == type) {
      g_reg[i] = g_reg[--g_nreg];
      g_live[type]--;
      return;
    }
}
/* reg_has_locked is reg_has under g_mu. */
static int reg_has_locked(const void *p, int type) {
  pthread_mutex_lock(&g_mu);
  int ok = reg_has(p, type);
  pthread_mutex_unlock(&g_mu);
  return ok;
}
/* reg_take removes p from the registry, under g_mu, and reports whether it was there. */
static int reg_take(const void *p, int type) {
  pthread_mutex_lock(&g_mu);
  int ok = reg_has(p, type);
  if (ok) reg_del(p, type);
  pthread_mutex_unlock(&g_mu);
  return ok;
}

typedef struct {
  QnnLog_Callback_t cb;
  uint32_t level;
} hs_log;
typedef struct {
  hs_log *log;
} hs_backend;
typedef struct {
  hs_log *log;
  int ctx_refs;
} hs_device;
struct hs_context;
typedef struct {
  struct hs_context *ctx;
  const hs_graph *g;
} hs_graph_h;
typedef struct hs_context {
  hs_backend *be;
  hs_device *dev;
  hs_model model;
  hs_graph_h *graphs;
} hs_context;
typedef struct {
  hs_context *ctx;
  void *map;
  size_t maplen;
  uint8_t *ptr;
  uint64_t avail;
  int fd;
  uint64_t offset;
  uint32_t dtype;
  uint64_t nbytes;
  uint32_t memtype; /* QNN_MEM_TYPE_ION / DMA_BUF / CUSTOM */
  dev_t dev;        /* the allocation behind the fd (a dup'd fd is the same one) */
  ino_t ino;
  uint32_t rank;
  uint32_t dims[8]; /* the first 8 dimensions of the registered shape */
} hs_mem;

/* ---- last error ---- */
static char g_errmsg[1024];
static uint32_t g_errcode;
static __thread char tl_msg[1024];

static const char *code_text(uint32_t c) {
  switch (c) {
  case 0: return "success";
  case 1000: return "not supported by hostsim";
  case 1002: return "memory allocation failed";
  case 1004: return "invalid argument";
  case 1005: return "operation not permitted";
  case 1007: return "system communication error (subsystem restart, recovered)";
  case 1008: return "incompatible binaries";
  case 1011: return "system communication error (fatal)";
  case 4004: return "backend: invalid argument";
  case 4011: return "backend: invalid handle";
  case 4012: return "backend: invalid config";
  case 5000: return "context: invalid argument";
  case 5002: return "context: invalid handle";
  case 5005: return "context: create from binary failed";
  case 5010: return "context: invalid config";
  case 6000: return "graph: invalid argument";
  case 6001: return "graph: invalid handle";
  case 6002: return "graph: graph does not exist";
  case 6003: return "graph: invalid name";
  case 6004: return "graph: invalid tensor";
  case 8000: return "mem: invalid argument";
  case 8001: return "mem: invalid handle";
  case 8002: return "mem: already registered";
  case 8003: return "mem: mapping failed";
  case 8004: return "mem: invalid shape";
  case 8005: return "mem: unsupported memory type";
  case 11003: return "log: invalid argument";
  case 11004: return "log: invalid handle";
  case 13000: return "perf: invalid handle pointer";
  case 13001: return "perf: invalid input";
  case 13002: return "perf: unsupported config";
  case 14000: return "device: invalid handle";
  case 14001: return "device: invalid config";
  case 14002: return "device: hardware unavailable";
  case 14003: return "device: still associated to a context";
  default: return NULL;
  }
}

static void log_msg(hs_log *lg, uint32_t level, const char *fmt, ...) {
  if (!lg || !lg->cb || level > lg->level) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  va_list ap;
  va_start(ap, fmt);
  lg->cb(fmt, level, (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000, ap);
  va_end(ap);
}

/* set_err records a readable message for errorGetMessage and returns code. */
static Qnn_ErrorHandle_t set_err(uint32_t code, const char *fmt, ...) {
  char buf[sizeof g_errmsg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_mu);
  memcpy(g_errmsg, buf, sizeof buf);
  g_errcode = code;
  pthread_mutex_unlock(&g_mu);
  return code;
}

static Qnn_ErrorHandle_t errorGetMessage(Qnn_ErrorHandle_t err, const char **out) {
  if (!out) return QNN_ERROR_INVALID_ARGUMENT;
  uint32_t code = (uint32_t)(err & 0xffff);
  pthread_mutex_lock(&g_mu);
  if (code != 0 && code == g_errcode) snprintf(tl_msg, sizeof tl_msg, "%s", g_errmsg);
  else {
    const char *t = code_text(code);
    if (!t) { pthread_mutex_unlock(&g_mu); return QNN_ERROR_INVALID_ERROR_HANDLE; }
    snprintf(tl_msg, sizeof tl_msg, "%s", t);
  }
  pthread_mutex_unlock(&g_mu);
  *out = tl_msg;
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t errorGetVerboseMessage(Qnn_ErrorHandle_t err, const char **out) {
  const char *m;
  Qnn_ErrorHandle_t e = errorGetMessage(err, &m);
  if (e) return e;
  *out = strdup(m);
  return *out ? QNN_SUCCESS : QNN_COMMON_ERROR_MEM_ALLOC;
}
static Qnn_ErrorHandle_t errorFreeVerboseMessage(const char *msg) {
  free((void *)msg);
  return QNN_SUCCESS;
}

/* ---- test switches ---- */
#define NOVR 16
static struct {
  char *name, *value;
} g_ovr[NOVR];
static int64_t g_exec_calls, g_exec_kind[3], g_exec_failed, g_exec_injected;
static char *g_script_path;
static uint32_t *g_script;
static size_t g_script_n, g_script_pos;
static void et_reset(void); /* ExecuTorch script state (et_script_first) */

/* sw copies switch `name` (a hostsim_set override, else the environment) into buf; NULL if unset. */
static const char *sw(const char *name, char *buf, size_t n) {
  const char *v = NULL;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < NOVR && !v; i++)
    if (g_ovr[i].name && !strcmp(g_ovr[i].name, name)) v = g_ovr[i].value;
  if (!v) v = getenv(name);
  if (v) snprintf(buf, n, "%s", v);
  pthread_mutex_unlock(&g_mu);
  return v ? buf : NULL;
}

EXPORT int hostsim_set(const char *name, const char *value) {
  if (!name) return -1;
  pthread_mutex_lock(&g_mu);
  int slot = -1;
  for (int i = 0; i < NOVR; i++)
    if (g_ovr[i].name && !strcmp(g_ovr[i].name, name)) slot = i;
  if (slot < 0)
    for (int i = 0; i < NOVR && slot < 0; i++)
      if (!g_ovr[i].name) slot = i;
  if (slot < 0) { pthread_mutex_unlock(&g_mu); return -1; }
  free(g_ovr[slot].name);
  free(g_ovr[slot].value);
  g_ovr[slot].name = value ? strdup(name) : NULL;
  g_ovr[slot].value = value ? strdup(value) : NULL;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

typedef struct {
  int64_t live_backends, live_devices, live_contexts, live_mems, live_logs, live_power_ids;
  int64_t exec_calls, exec_prefill, exec_decode, exec_lmhead, exec_failed, exec_injected;
} hostsim_stats_t;

typedef struct {
  uint32_t live, set_calls;
  uint32_t dcvs_set, dcvs_enable, power_mode, sleep_latency, sleep_disable;
  uint32_t bus_min, bus_target, bus_max, core_min, core_target, core_max;
  uint32_t rpc_control_latency, rpc_polling_time, hmx_timeout_us;
  uint32_t mem_grow_size, mem_config_calls;
  uint32_t destroy_power_mode; /* power_mode in force when destroyPowerConfigId ran (0 while the id lives) */
} hostsim_power_t;
_Static_assert(sizeof(hostsim_stats_t) == 96, "stats size");
_Static_assert(sizeof(hostsim_power_t) == 76, "power size");

#define MAXPOWER 64
static hostsim_power_t g_power[MAXPOWER + 1];
static uint32_t g_power_next = 1, g_power_last, g_mem_grow, g_mem_calls;
static int64_t g_live_power;

EXPORT int hostsim_stats(hostsim_stats_t *o) {
  if (!o) return -1;
  pthread_mutex_lock(&g_mu);
  *o = (hostsim_stats_t){g_live[T_BACKEND], g_live[T_DEVICE], g_live[T_CONTEXT], g_live[T_MEM], g_live[T_LOG],
                         g_live_power, g_exec_calls, g_exec_kind[0], g_exec_kind[1], g_exec_kind[2],
                         g_exec_failed, g_exec_injected};
  pthread_mutex_unlock(&g_mu);
  return 0;
}

EXPORT void hostsim_reset(void) {
  pthread_mutex_lock(&g_mu);
  g_exec_calls = g_exec_failed = g_exec_injected = 0;
  memset(g_exec_kind, 0, sizeof g_exec_kind);
  g_script_pos = 0;
  et_reset();
  free(g_script_path);
  g_script_path = NULL;
  pthread_mutex_unlock(&g_mu);
}

EXPORT int hostsim_power_config(uint32_t id, hostsim_power_t *out) {
  pthread_mutex_lock(&g_mu);
  if (!out || id >= g_power_next || id > MAXPOWER) { pthread_mutex_unlock(&g_mu); return -1; }
  *out = g_power[id];
  out->mem_grow_size = g_mem_grow;
  out->mem_config_calls = g_mem_calls;
  pthread_mutex_unlock(&g_mu);
  return 0;
}
EXPORT uint32_t hostsim_power_last_id(void) {
  pthread_mutex_lock(&g_mu);
  uint32_t id = g_power_last;
  pthread_mutex_unlock(&g_mu);
  return id;
}

/* ---- perf infrastructure ---- */
static Qnn_ErrorHandle_t perf_create(uint32_t dev, uint32_t core, uint32_t *id) {
  (void)dev;
  (void)core;
  if (!id) return set_err(QNN_PERF_ERROR_INVALID_HANDLE_PTR, "createPowerConfigId: NULL id pointer");
  pthread_mutex_lock(&g_mu);
  uint32_t n = 0;
  if (g_power_next <= MAXPOWER) n = g_power_next++;
  else /* all slots used once: reuse a destroyed id, as a process that loads and unloads models does */
    for (uint32_t i = 1; i <= MAXPOWER && !n; i++)
      if (!g_power[i].live) n = i;
  if (!n) { pthread_mutex_unlock(&g_mu); return set_err(QNN_PERF_ERROR_INVALID_INPUT, "too many power config ids"); }
  *id = n;
  memset(&g_power[*id], 0, sizeof g_power[*id]);
  g_power[*id].live = 1;
  g_power_last = *id;
  g_live_power++;
  pthread_mutex_unlock(&g_mu);
  return QNN_SUCCESS;
}
static int power_live(uint32_t id) { return id > 0 && id < g_power_next && g_power[id].live; }
static Qnn_ErrorHandle_t perf_destroy(uint32_t id) {
  pthread_mutex_lock(&g_mu);
  if (!power_live(id)) { pthread_mutex_unlock(&g_mu); return set_err(QNN_PERF_ERROR_INVALID_INPUT, "destroyPowerConfigId: unknown id %u", id); }
  g_power[id].live = 0;
  g_power[id].destroy_power_mode = g_power[id].power_mode;
  g_live_power--;
  pthread_mutex_unlock(&g_mu);
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t perf_set(uint32_t id, const QnnHtpPerfInfrastructure_PowerConfig_t **cfgs) {
  pthread_mutex_lock(&g_mu);
  /* client id 0 is allowed by the header (recorded in slot 0); others must come from createPowerConfigId */
  if (id != 0 && !power_live(id)) { pthread_mutex_unlock(&g_mu); return set_err(QNN_PERF_ERROR_INVALID_INPUT, "setPowerConfig: unknown power config id %u", id); }
  if (!cfgs) { pthread_mutex_unlock(&g_mu); return QNN_SUCCESS; } /* no configs: nothing to change */
  hostsim_power_t p = g_power[id];
  for (int i = 0; cfgs[i]; i++) {
    const QnnHtpPerfInfrastructure_PowerConfig_t *c = cfgs[i];
    switch (c->option) {
    case QNN_HTP_PERF_CONFIG_DCVS_V3: {
      const QnnHtpPerfInfrastructure_DcvsV3_t *d = &c->dcvsV3Config;
      if (d->contextId != id) {
        pthread_mutex_unlock(&g_mu);
        return set_err(QNN_PERF_ERROR_INVALID_INPUT, "setPowerConfig: DCVS_V3 contextId %u != power config id %u", d->contextId, id);
      }
      p.dcvs_set = 1;
      if (d->setDcvsEnable) p.dcvs_enable = d->dcvsEnable;
      p.power_mode = d->powerMode;
      if (d->setSleepLatency) p.sleep_latency = d->sleepLatency;
      if (d->setSleepDisable) p.sleep_disable = d->sleepDisable;
      if (d->setBusParams) p.bus_min = d->busVoltageCornerMin, p.bus_target = d->busVoltageCornerTarget, p.bus_max = d->busVoltageCornerMax;
      if (d->setCoreParams) p.core_min = d->coreVoltageCornerMin, p.core_target = d->coreVoltageCornerTarget, p.core_max = d->coreVoltageCornerMax;
      break;
    }
    case QNN_HTP_PERF_CONFIG_RPC_CONTROL_LATENCY: p.rpc_control_latency = c->rpcControlLatencyConfig; break;
    case QNN_HTP_PERF_CONFIG_RPC_POLLING_TIME:
      if (c->rpcPollingTimeConfig > 9999) {
        pthread_mutex_unlock(&g_mu);
        return set_err(QNN_PERF_ERROR_INVALID_INPUT, "setPowerConfig: RPC polling time %u > 9999", c->rpcPollingTimeConfig);
      }
      p.rpc_polling_time = c->rpcPollingTimeConfig;
      break;
    case QNN_HTP_PERF_CONFIG_HMX_TIMEOUT_INTERVAL_US: p.hmx_timeout_us = c->hmxTimeoutIntervalUsConfig; break;
    case 5: case 6: case 7: break; /* HMX_V2, adaptive polling, DDR perf mode: accepted, not recorded */
    default:
      pthread_mutex_unlock(&g_mu);
      return set_err(QNN_PERF_ERROR_UNSUPPORTED_CONFIG, "setPowerConfig: unsupported option %u", c->option);
    }
  }
  p.set_calls++;
  g_power[id] = p;
  pthread_mutex_unlock(&g_mu);
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t perf_mem(uint32_t dev, uint32_t core, const QnnHtpPerfInfrastructure_MemoryConfig_t **cfgs) {
  (void)dev;
  (void)core;
  if (!cfgs) return QNN_SUCCESS; /* no configs: nothing to change */
  pthread_mutex_lock(&g_mu);
  for (int i = 0; cfgs[i]; i++)
    if (cfgs[i]->option == 1) g_mem_grow = cfgs[i]->growSizeConfig;
  g_mem_calls++;
  pthread_mutex_unlock(&g_mu);
  return QNN_SUCCESS;
}
static QnnHtpDevice_Infrastructure_t g_infra = {0, {perf_create, perf_destroy, perf_set, perf_mem}};

static Qnn_ErrorHandle_t deviceGetInfrastructure(const void **out) {
  if (!out) return set_err(QNN_COMMON_ERROR_INVALID_ARGUMENT, "deviceGetInfrastructure: NULL out");
  *out = &g_infra;
  return QNN_SUCCESS;
}

/* ---- log ---- */
static Qnn_ErrorHandle_t logCreate(QnnLog_Callback_t cb, uint32_t level, void **out) {
  if (!out) return QNN_LOG_ERROR_INVALID_ARGUMENT;
  if (level < LOG_ERROR || level > LOG_DEBUG) return set_err(QNN_LOG_ERROR_INVALID_ARGUMENT, "logCreate: bad level %u", level);
  hs_log *l = calloc(1, sizeof *l);
  if (!l) return QNN_COMMON_ERROR_MEM_ALLOC;
  l->cb = cb;
  l->level = level;
  reg_add_locked(l, T_LOG);
  *out = l;
  log_msg(l, LOG_VERBOSE, "hostsim: log created (level %u)", level);
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t logSetLogLevel(void *h, uint32_t level) {
  pthread_mutex_lock(&g_mu);
  int ok = reg_has(h, T_LOG);
  if (ok && level >= LOG_ERROR && level <= LOG_DEBUG) ((hs_log *)h)->level = level;
  pthread_mutex_unlock(&g_mu);
  if (!ok) return set_err(QNN_LOG_ERROR_INVALID_HANDLE, "logSetLogLevel: invalid log handle");
  if (level < LOG_ERROR || level > LOG_DEBUG) return set_err(QNN_LOG_ERROR_INVALID_ARGUMENT, "logSetLogLevel: bad level %u", level);
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t logFree(void *h) {
  int ok = reg_take(h, T_LOG);
  if (!ok) return set_err(QNN_LOG_ERROR_INVALID_HANDLE, "logFree: invalid log handle");
  free(h);
  return QNN_SUCCESS;
}
/* live_log returns lg if it is still a live log handle (callers hold no lock). */
static hs_log *live_log(hs_log *lg) {
  int ok = reg_has_locked(lg, T_LOG);
  return ok ? lg : NULL;
}

/* ---- backend ---- */
static Qnn_ErrorHandle_t propertyHasCapability(uint32_t key) {
  return key == QNN_PROPERTY_GROUP_DEVICE ? QNN_SUCCESS : QNN_COMMON_ERROR_NOT_SUPPORTED;
}
static Qnn_ErrorHandle_t backendCreate(void *log, const QnnBackend_Config_t **cfg, void **out) {
  if (!out) return set_err(QNN_BACKEND_ERROR_INVALID_ARGUMENT, "backendCreate: NULL out");
  if (log && !live_log(log)) return set_err(QNN_BACKEND_ERROR_INVALID_HANDLE, "backendCreate: invalid log handle");
  for (int i = 0; cfg && cfg[i]; i++)
    if (cfg[i]->option > QNN_BACKEND_CONFIG_OPTION_PLATFORM || (cfg[i]->option == QNN_BACKEND_CONFIG_OPTION_CUSTOM && !cfg[i]->ptr))
      return set_err(QNN_BACKEND_ERROR_INVALID_CONFIG, "backendCreate: unknown backend config option %u", cfg[i]->option);
  hs_backend *b = calloc(1, sizeof *b);
  if (!b) return QNN_COMMON_ERROR_MEM_ALLOC;
  b->log = log;
  reg_add_locked(b, T_BACKEND);
  *out = b;
  log_msg(b->log, LOG_INFO, "hostsim: backend created, build id %s, core API %d.%d.%d", BUILD_ID, 2, 32, 0);
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t backendFree(void *h) {
  pthread_mutex_lock(&g_mu);
  int ok = reg_has(h, T_BACKEND), busy = 0;
  for (size_t i = 0; ok && i < g_nreg; i++)
    if (g_reg[i].type == T_CONTEXT && ((hs_context *)g_reg[i].p)->be == h) busy = 1;
  if (ok && !busy) reg_del(h, T_BACKEND);
  pthread_mutex_unlock(&g_mu);
  if (!ok) return set_err(QNN_BACKEND_ERROR_INVALID_HANDLE, "backendFree: invalid backend handle");
  if (busy) return set_err(QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED, "backendFree: contexts still exist; free them first");
  free(h);
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t backendGetApiVersion(Qnn_ApiVersion_t *v) {
  if (!v) return QNN_BACKEND_ERROR_INVALID_ARGUMENT;
  *v = (Qnn_ApiVersion_t){{2, 32, 0}, {5, 43, 0}};
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t backendGetBuildId(const char **out) {
  if (!out) return QNN_BACKEND_ERROR_INVALID_ARGUMENT;
  *out = BUILD_ID;
  return QNN_SUCCESS;
}

/* ---- device ---- */
#define SKEL "libQnnHtpV79Skel.so"
/* skel_found reports whether SKEL is in one of ADSP_LIBRARY_PATH's ';'-separated folders (a ':' list is one
 * folder name to the DSP loader, as on a phone). */
static int skel_found(void) {
  const char *v = getenv("ADSP_LIBRARY_PATH");
  if (!v) return 0;
  char path[4096];
  for (const char *p = v; *p;) {
    const char *end = strchr(p, ';');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n > 0 && n + sizeof SKEL + 1 < sizeof path) {
      snprintf(path, sizeof path, "%.*s/%s", (int)n, p, SKEL);
      if (access(path, R_OK) == 0) return 1;
    }
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

static Qnn_ErrorHandle_t deviceCreate(void *log, const QnnDevice_Config_t **cfg, void **out) {
  if (!out) return set_err(QNN_COMMON_ERROR_INVALID_ARGUMENT, "deviceCreate: NULL out");
  if (log && !live_log(log)) return set_err(QNN_DEVICE_ERROR_INVALID_HANDLE, "deviceCreate: invalid log handle");
  char sb[8];
  if (sw("HOSTSIM_DEVICE_UNSUPPORTED", sb, sizeof sb)) {
    *out = NULL;
    return set_err(QNN_DEVICE_ERROR_UNSUPPORTED_FEATURE, "deviceCreate: device feature unsupported (HOSTSIM_DEVICE_UNSUPPORTED)");
  }
  if (sw("HOSTSIM_REQUIRE_SKEL", sb, sizeof sb) && !skel_found()) {
    const char *v = getenv("ADSP_LIBRARY_PATH");
    log_msg(live_log(log), LOG_ERROR, "hostsim: Transport layer setup failed: %s not found in ADSP_LIBRARY_PATH", SKEL);
    return set_err(QNN_DEVICE_ERROR_INVALID_CONFIG, "deviceCreate: Transport layer setup failed: %s not found in ADSP_LIBRARY_PATH=\"%s\"",
                   SKEL, v ? v : "");
  }
  for (int i = 0; cfg && cfg[i]; i++) {
    if (cfg[i]->option == 1) continue; /* PLATFORM_INFO */
    if (cfg[i]->option != 0 || !cfg[i]->customConfig)
      return set_err(QNN_DEVICE_ERROR_INVALID_CONFIG, "deviceCreate: unsupported device config option %u", cfg[i]->option);
    const QnnHtpDevice_CustomConfig_t *c = cfg[i]->customConfig;
    if (c->option == QNN_HTP_DEVICE_CONFIG_OPTION_SOC && c->socModel != 69)
      return set_err(QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE, "deviceCreate: SoC model %u requested, hostsim emulates 69 (SM8750)", c->socModel);
    if (c->option == QNN_HTP_DEVICE_CONFIG_OPTION_ARCH && c->arch.arch != 79)
      return set_err(QNN_DEVICE_ERROR_INVALID_CONFIG, "deviceCreate: DSP arch v%u requested, hostsim emulates v79", c->arch.arch);
  }
  hs_device *d = calloc(1, sizeof *d);
  if (!d) return QNN_COMMON_ERROR_MEM_ALLOC;
  d->log = log;
  reg_add_locked(d, T_DEVICE);
  *out = d;
  log_msg(d->log, LOG_INFO, "hostsim: device created (v%u, SoC %u)", 79, 69);
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t deviceFree(void *h) {
  pthread_mutex_lock(&g_mu);
  int ok = reg_has(h, T_DEVICE), busy = ok && ((hs_device *)h)->ctx_refs > 0;
  if (ok && !busy) reg_del(h, T_DEVICE);
  pthread_mutex_unlock(&g_mu);
  if (!ok) return set_err(QNN_DEVICE_ERROR_INVALID_HANDLE, "deviceFree: invalid device handle");
  if (busy) return set_err(QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT, "deviceFree: device still used by a context");
  free(h);
  return QNN_SUCCESS;
}

typedef struct {
  QnnDevice_PlatformInfo_t pi;
  QnnDevice_HardwareDeviceInfo_t hw;
  QnnDevice_CoreInfo_t core;
  QnnHtpDevice_DeviceInfoExtension_t ext;
} platform_block;

static Qnn_ErrorHandle_t deviceGetPlatformInfo(void *log, const QnnDevice_PlatformInfo_t **out) {
  (void)log;
  if (!out) return set_err(QNN_COMMON_ERROR_INVALID_ARGUMENT, "deviceGetPlatformInfo: NULL out");
  platform_block *b = calloc(1, sizeof *b);
  if (!b) return QNN_COMMON_ERROR_MEM_ALLOC;
  b->ext = (QnnHtpDevice_DeviceInfoExtension_t){0, {8, 69, 1, 1, 79}};
  b->core.version = 1;
  b->hw.version = 1;
  b->hw.v1.numCores = 1;
  b->hw.v1.cores = &b->core;
  b->hw.v1.deviceInfoExtension = &b->ext;
  b->pi.version = 1;
  b->pi.v1.numHwDevices = 1;
  b->pi.v1.hwDevices = &b->hw;
  reg_add_locked(b, T_PLATFORM);
  *out = &b->pi;
  return QNN_SUCCESS;
}
static Qnn_ErrorHandle_t deviceGetInfo(void *dev, const QnnDevice_PlatformInfo_t **out) {
  int ok = reg_has_locked(dev, T_DEVICE);
  if (!ok) return set_err(QNN_DEVICE_ERROR_INVALID_HANDLE, "deviceGetInfo: invalid device handle");
  return deviceGetPlatformInfo(NULL, out);
}
static Qnn_ErrorHandle_t deviceFreePlatformInfo(void *log, const QnnDevice_PlatformInfo_t *p) {
  (void)log;
  int ok = reg_take(p, T_PLATFORM);
  if (!ok) return set_err(QNN_DEVICE_ERROR_INVALID_HANDLE, "deviceFreePlatformInfo: not a platform info from this backend");
  free((void *)p);
  return QNN_SUCCESS;
}

/* ---- context ---- */
static Qnn_ErrorHandle_t contextCreateFromBinary(void *backend, void *device, const QnnContext_Config_t **cfg,
                                                 const void *buf, uint64_t size, void **out, void *profile) {
  (void)profile;
  /* HTP custom configs (QnnHtpContext_CustomConfig_t: option u32 @0, union @8; options 1 … 13):
   * REGISTER_MULTI_CONTEXTS (2: firstGroupHandle @8, maxSpillFillBuffer u64 @16), which sharded ExecuTorch
   * exports and Genie bundles with spill-fill-bufsize pass, and FILE_READ_MEMORY_BUDGET (3: u64 MB @8). */
  int in_group = 0;
  void *group = NULL;
  uint64_t spill_fill = 0, read_budget = 0;
  for (int i = 0; cfg && cfg[i]; i++) {
    if (cfg[i]->option > QNN_CONTEXT_CONFIG_OPTION_LAST || (cfg[i]->option == QNN_CONTEXT_CONFIG_OPTION_CUSTOM && !cfg[i]->customConfig))
      return set_err(QNN_CONTEXT_ERROR_INVALID_CONFIG, "contextCreateFromBinary: unknown context config option %u", cfg[i]->option);
    if (cfg[i]->option != QNN_CONTEXT_CONFIG_OPTION_CUSTOM) continue;
    const uint8_t *cc = cfg[i]->customConfig;
    uint32_t opt;
    memcpy(&opt, cc, 4);
    if (opt < 1 || opt > 13)
      return set_err(QNN_CONTEXT_ERROR_INVALID_CONFIG, "contextCreateFromBinary: unknown HTP context custom option %u", opt);
    if (opt == 2) {
      in_group = 1;
      memcpy(&group, cc + 8, sizeof group);
      memcpy(&spill_fill, cc + 16, 8);
    }
    if (opt == 3) memcpy(&read_budget, cc + 8, 8);
  }
  pthread_mutex_lock(&g_mu);
  int okb = reg_has(backend, T_BACKEND), okd = !device || reg_has(device, T_DEVICE);
  pthread_mutex_unlock(&g_mu);
  if (!okb) return set_err(QNN_CONTEXT_ERROR_INVALID_HANDLE, "contextCreateFromBinary: invalid backend handle");
  if (!okd) return set_err(QNN_CONTEXT_ERROR_INVALID_HANDLE, "contextCreateFromBinary: invalid device handle");
  if (!out || !buf || !size) return set_err(QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "contextCreateFromBinary: NULL buffer, size 0 or NULL out");
  if (group && !reg_has_locked(group, T_CONTEXT)) /* a group's first context must live */
    return set_err(QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "contextCreateFromBinary: REGISTER_MULTI_CONTEXTS firstGroupHandle %p is not a live context", group);
  hs_context *c = calloc(1, sizeof *c);
  if (!c) return QNN_COMMON_ERROR_MEM_ALLOC;
  char err[512];
  hs_backend *be = backend;
  if (hs_model_load(buf, size, &c->model, err, sizeof err)) {
    free(c);
    log_msg(live_log(be->log), LOG_ERROR, "hostsim: failed to create context from binary: %s", err);
    return set_err(QNN_CONTEXT_ERROR_CREATE_FROM_BINARY, "contextCreateFromBinary: %s", err);
  }
  c->graphs = calloc(c->model.d.ngraphs, sizeof *c->graphs);
  if (!c->graphs) { hs_model_free(&c->model); free(c); return QNN_COMMON_ERROR_MEM_ALLOC; }
  c->be = be;
  c->dev = device;
  pthread_mutex_lock(&g_mu);
  for (uint32_t g = 0; g < c->model.d.ngraphs; g++) {
    c->graphs[g].ctx = c;
    c->graphs[g].g = &c->model.d.graphs[g];
    reg_add(&c->graphs[g], T_GRAPH);
  }
  if (c->dev) c->dev->ctx_refs++;
  reg_add(c, T_CONTEXT);
  pthread_mutex_unlock(&g_mu);
  size_t scratch = 0;
  for (uint32_t g = 0; g < c->model.d.ngraphs; g++)
    if (c->model.d.graphs[g].kind == HS_KIND_GENIE) {
      size_t n = hs_genie_scratch(&c->model, &c->model.d.graphs[g]);
      scratch = n > scratch ? n : scratch;
    }
  pthread_mutex_lock(&g_exec);
  hs_scratch_reserve(scratch);
  pthread_mutex_unlock(&g_exec);
  *out = c;
  log_msg(live_log(be->log), LOG_INFO, "hostsim: context created: %u graphs, %llu weight bytes, spill-fill group %s (%llu B), read budget %llu MB",
          c->model.d.ngraphs, (unsigned long long)c->model.weight_bytes, !in_group ? "none" : group ? "joined" : "started",
          (unsigned long long)spill_fill, (unsigned long long)read_budget);
  return QNN_SUCCESS;
}

static void mem_release(hs_mem *m) {
  munmap(m->map, m->maplen);
  free(m);
}

static Qnn_ErrorHandle_t contextFree(void *h, void *profile) {
  (void)profile;
  pthread_mutex_lock(&g_exec);
  hs_et_forget();
  pthread_mutex_lock(&g_mu);
  int ok = reg_has(h, T_CONTEXT);
  hs_context *c = h;
  if (ok) {
    reg_del(c, T_CONTEXT);
    for (uint32_t g = 0; g < c->model.d.ngraphs; g++) reg_del(&c->graphs[g], T_GRAPH);
    for (size_t i = 0; i < g_nreg;) {
      if (g_reg[i].type == T_MEM && ((hs_mem *)g_reg[i].p)->ctx == c) {
        hs_mem *m = g_reg[i].p;
        reg_del(m, T_MEM);
        mem_release(m);
      } else i++;
    }
    if (c->dev) c->dev->ctx_refs--;
  }
  if (!g_live[T_CONTEXT]) hs_scratch_free(); /* the last context: no graph is left to run */
  pthread_mutex_unlock(&g_mu);
  pthread_mutex_unlock(&g_exec);
  if (!ok) return set_err(QNN_CONTEXT_ERROR_INVALID_HANDLE, "contextFree: invalid context handle");
  hs_model_free(&c->model);
  free(c->graphs);
  free(c);
  return QNN_SUCCESS;
}

static Qnn_ErrorHandle_t contextGetProperty(void *h, QnnContext_Property_t **props) {
  int ok = reg_has_locked(h, T_CONTEXT);
  if (!ok) return set_err(QNN_CONTEXT_ERROR_INVALID_HANDLE, "contextGetProperty: invalid context handle");
  if (!props) return set_err(QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "contextGetProperty: NULL property list");
  hs_context *c = h;
  for (int i = 0; props[i]; i++) {
    if (props[i]->option != 0 || !props[i]->customProperty)
      return set_err(QNN_COMMON_ERROR_NOT_SUPPORTED, "contextGetProperty: option %u not supported", props[i]->option);
    QnnHtpContext_CustomProperty_t *p = props[i]->customProperty;
    switch (p->option) {
    case 1: p->value = 64; break;
    case 2: p->value = 0; break;
    case 3: p->value = c->model.weight_bytes; break;
    default: return set_err(QNN_COMMON_ERROR_NOT_SUPPORTED, "contextGetProperty: HTP property %u not supported", p->option);
    }
  }
  return QNN_SUCCESS;
}

static Qnn_ErrorHandle_t graphRetrieve(void *ctx, const char *name, void **out) {
  int ok = reg_has_locked(ctx, T_CONTEXT);
  if (!ok) return set_err(QNN_GRAPH_ERROR_INVALID_HANDLE, "graphRetrieve: invalid context handle");
  if (!name || !*name) return set_err(QNN_GRAPH_ERROR_INVALID_NAME, "graphRetrieve: empty graph name");
  if (!out) return set_err(QNN_GRAPH_ERROR_INVALID_NAME, "graphRetrieve: NULL graph handle pointer");
  hs_context *c = ctx;
  for (uint32_t g = 0; g < c->model.d.ngraphs; g++)
    if (!strcmp(c->model.d.graphs[g].name, name)) {
      *out = &c->graphs[g];
      return QNN_SUCCESS;
    }
  return set_err(QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST, "graphRetrieve: no graph named \"%s\" in the context", name);
}

/* ---- memory ---- */
/* mem_conflict enforces one registration kind per allocation, as ExecuTorch's QnnMemManager uses the API:
 * an fd registered as ION (or DMA_BUF) in a context is registered once, whole, and takes no CUSTOM
 * (shared-buffer) registration beside it; CUSTOM registrations of one fd may view it at several offsets and
 * shapes (one rpcmem block carved into tensors, one KV buffer seen by two graphs) but never twice with the
 * same offset, data type and shape. Any other overlap is 8002 ALREADY_REGISTERED. The allocation is the fd's
 * file (device and inode), so a dup'd fd names the same one. */
static Qnn_ErrorHandle_t mem_conflict(const void *ctx, const Qnn_MemDescriptor_t *d, int fd, const struct stat *st, uint64_t off,
                                      uint64_t need, uint32_t i) {
  int custom = d->memType == QNN_MEM_TYPE_CUSTOM;
  const char *why = NULL;
  pthread_mutex_lock(&g_mu);
  for (size_t r = 0; r < g_nreg && !why; r++) {
    const hs_mem *o = g_reg[r].p;
    if (g_reg[r].type != T_MEM || o->ctx != ctx || o->dev != st->st_dev || o->ino != st->st_ino) continue;
    int ocustom = o->memtype == QNN_MEM_TYPE_CUSTOM;
    if (!custom) why = ocustom ? "already has shared-buffer (CUSTOM) registrations" : "is already registered whole (ION)";
    else if (!ocustom) why = "is already registered whole (ION)";
    else if (o->offset == off && o->dtype == d->dataType && o->nbytes == need && o->rank == d->memShape.numDim) {
      int same = 1;
      for (uint32_t k = 0; k < o->rank && k < 8; k++) same &= o->dims[k] == d->memShape.dimSize[k];
      if (same) why = "is already registered with this offset, data type and shape";
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (!why) return 0;
  return set_err(QNN_MEM_ERROR_ALREADY_REGISTERED, "memRegister[%u]: fd %d (offset %llu) %s in this context", i, fd,
                 (unsigned long long)off, why);
}

static Qnn_ErrorHandle_t memRegister(void *ctx, const Qnn_MemDescriptor_t *descs, uint32_t n, void **handles) {
  int ok = reg_has_locked(ctx, T_CONTEXT);
  if (handles) /* the header: on failure every handle is NULL; on success each is set below */
    for (uint32_t k = 0; k < n; k++) handles[k] = NULL;
  if (!ok) return set_err(QNN_MEM_ERROR_INVALID_HANDLE, "memRegister: invalid context handle");
  if (!descs || !handles || n == 0) return set_err(QNN_MEM_ERROR_INVALID_ARGUMENT, "memRegister: NULL descriptors/handles or n = 0");
  char fb[32];
  if (sw("HOSTSIM_FAIL_MEM_REGISTER", fb, sizeof fb)) {
    long code = strtol(fb, NULL, 10);
    if (code < 1000 || code > 0xFFFF) code = QNN_MEM_ERROR_MAPPING;
    return set_err((Qnn_ErrorHandle_t)code, "memRegister: injected failure (HOSTSIM_FAIL_MEM_REGISTER)");
  }
  for (uint32_t i = 0; i < n; i++) {
    const Qnn_MemDescriptor_t *d = &descs[i];
    Qnn_ErrorHandle_t e = 0;
    uint64_t es = hs_dtype_bytes(d->dataType), need = es;
    if (!es) e = set_err(QNN_MEM_ERROR_INVALID_ARGUMENT, "memRegister[%u]: unsupported data type 0x%04x", i, d->dataType);
    else if (d->memShape.numDim == 0 || !d->memShape.dimSize)
      e = set_err(QNN_MEM_ERROR_INVALID_SHAPE, "memRegister[%u]: empty shape", i);
    for (uint32_t k = 0; !e && k < d->memShape.numDim; k++) need *= d->memShape.dimSize[k];
    int fd = -1;
    uint64_t off = 0, declared = 0;
    if (!e) {
      if (d->memType == QNN_MEM_TYPE_ION) fd = d->ionInfo.fd;
      else if (d->memType == QNN_MEM_TYPE_DMA_BUF) fd = d->dmaBufInfo.fd;
      else if (d->memType == QNN_MEM_TYPE_CUSTOM) {
        const QnnMemHtp_Descriptor_t *h = d->customInfo;
        if (!h) e = set_err(QNN_MEM_ERROR_INVALID_ARGUMENT, "memRegister[%u]: CUSTOM without QnnMemHtp_Descriptor_t", i);
        else if (h->type != QNN_HTP_MEM_SHARED_BUFFER)
          e = set_err(QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE, "memRegister[%u]: HTP mem type %u not supported (want SHARED_BUFFER)", i, h->type);
        else {
          fd = h->sharedBufferConfig.fd;
          off = h->sharedBufferConfig.offset;
          declared = h->size;
          if (off > declared || declared - off < need)
            e = set_err(QNN_MEM_ERROR_INVALID_SHAPE, "memRegister[%u]: offset %llu + %llu bytes exceeds shared buffer size %llu", i,
                        (unsigned long long)off, (unsigned long long)need, (unsigned long long)declared);
        }
      } else e = set_err(QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE, "memRegister[%u]: memType %u not supported", i, d->memType);
    }
    struct stat st;
    if (!e && (fd < 0 || fstat(fd, &st) != 0))
      e = set_err(QNN_MEM_ERROR_MAPPING, "memRegister[%u]: fd %d is not an open file (%s)", i, fd, strerror(errno));
    if (!e && declared > (uint64_t)st.st_size)
      e = set_err(QNN_MEM_ERROR_INVALID_SHAPE, "memRegister[%u]: shared buffer size %llu exceeds fd %d's %lld bytes", i,
                  (unsigned long long)declared, fd, (long long)st.st_size);
    if (!e && (off > (uint64_t)st.st_size || (uint64_t)st.st_size - off < need))
      e = set_err(QNN_MEM_ERROR_INVALID_SHAPE, "memRegister[%u]: fd %d has %lld bytes, need %llu at offset %llu", i, fd,
                  (long long)st.st_size, (unsigned long long)need, (unsigned long long)off);
    hs_mem *m = NULL;
    if (!e) e = mem_conflict(ctx, d, fd, &st, off, need, i);
    if (!e) {
      void *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (map == MAP_FAILED) e = set_err(QNN_MEM_ERROR_MAPPING, "memRegister[%u]: mmap of fd %d failed: %s", i, fd, strerror(errno));
      else if (!(m = calloc(1, sizeof *m))) { munmap(map, (size_t)st.st_size); e = QNN_COMMON_ERROR_MEM_ALLOC; }
      else {
#ifdef MADV_POPULATE_WRITE
        /* The NPU's mapping of a registered buffer exists from its registration: the tensor's pages are
         * mapped now, not faulted in by the graph's first calls (best effort: older kernels fault them). */
        uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)map + off) & ~(pg - 1);
        madvise((void *)lo, (uintptr_t)map + off + need - lo, MADV_POPULATE_WRITE);
#endif
        *m = (hs_mem){ctx, map, (size_t)st.st_size, (uint8_t *)map + off, (uint64_t)st.st_size - off, fd, off, d->dataType, need,
                      d->memType, st.st_dev, st.st_ino, d->memShape.numDim, {0}};
        for (uint32_t k = 0; k < d->memShape.numDim && k < 8; k++) m->dims[k] = d->memShape.dimSize[k];
      }
    }
    if (e) { /* the header: on failure every handle is set to NULL */
      pthread_mutex_lock(&g_mu);
      for (uint32_t k = 0; k < i; k++) {
        reg_del(handles[k], T_MEM);
        mem_release(handles[k]);
      }
      pthread_mutex_unlock(&g_mu);
      for (uint32_t k = 0; k < i; k++) handles[k] = NULL;
      return e;
    }
    reg_add_locked(m, T_MEM);
    handles[i] = m;
  }
  return QNN_SUCCESS;
}

static Qnn_ErrorHandle_t memDeRegister(void **handles, uint32_t n) {
  if (!handles || n == 0) return set_err(QNN_MEM_ERROR_INVALID_ARGUMENT, "memDeRegister: NULL handles or n = 0");
  pthread_mutex_lock(&g_exec);
  hs_et_forget();
  pthread_mutex_lock(&g_mu);
  for (uint32_t i = 0; i < n; i++)
    if (!reg_has(handles[i], T_MEM)) {
      pthread_mutex_unlock(&g_mu);
      pthread_mutex_unlock(&g_exec);
      return set_err(QNN_MEM_ERROR_INVALID_HANDLE, "memDeRegister[%u]: not a registered mem handle", i);
    }
  for (uint32_t i = 0; i < n; i++) {
    reg_del(handles[i], T_MEM);
    mem_release(handles[i]);
  }
  pthread_mutex_unlock(&g_mu);
  pthread_mutex_unlock(&g_exec);
  return QNN_SUCCESS;
}

/* ---- execute ---- */
static const Qnn_TensorV1_t *tv(const Qnn_Tensor_t *t) { return &t->v1; } /* V1 and V2 share the prefix */

static int is_fixed(uint32_t dt) { return (dt & 0xff00) == 0x0300 || (dt & 0xff00) == 0x0400; }

/* type_ok: graphExecute takes APP_* and OPTIONAL_APP_* tensors of the tensor's direction. */
static int type_ok(uint32_t type, int input) {
  switch (type) {
  case QNN_TENSOR_TYPE_APP_READWRITE:
  case QNN_TENSOR_TYPE_OPTIONAL_APP_READWRITE: return 1;
  case QNN_TENSOR_TYPE_APP_WRITE:
  case QNN_TENSOR_TYPE_OPTIONAL_APP_WRITE: return input;
  case QNN_TENSOR_TYPE_APP_READ:
  case QNN_TENSOR_TYPE_OPTIONAL_APP_READ: return !input;
  default: return 0;
  }
}

static Qnn_ErrorHandle_t bind_tensors(const hs_graph_h *gh, const Qnn_Tensor_t *ts, uint32_t n, int input, void **ptrs) {
  const hs_graph *g = gh->g;
  const hs_tensor *want = input ? g->in : g->out;
  uint32_t cnt = input ? g->nin : g->nout;
  const char *what = input ? "input" : "output";
  if (n != cnt) return set_err(QNN_GRAPH_ERROR_INVALID_ARGUMENT, "graph %s: %u %ss given, the graph has %u", g->name, n, what, cnt);
  if (n && !ts) return set_err(QNN_GRAPH_ERROR_INVALID_ARGUMENT, "graph %s: NULL %s array", g->name, what);
  for (uint32_t i = 0; i < cnt; i++) ptrs[i] = NULL;
  for (uint32_t k = 0; k < n; k++) {
    const Qnn_Tensor_t *t = &ts[k];
    if (t->version != 1 && t->version != 2)
      return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: %s %u: bad tensor version %u", g->name, what, k, t->version);
    const Qnn_TensorV1_t *v = tv(t);
    int idx = -1;
    for (uint32_t i = 0; i < cnt; i++)
      if (want[i].id == v->id) idx = (int)i;
    if (idx < 0) return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: %s %u: unknown tensor id %u", g->name, what, k, v->id);
    const hs_tensor *w = &want[idx];
    if (ptrs[idx]) return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: %s %s given twice", g->name, what, w->name);
    if (v->name && strcmp(v->name, w->name))
      return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: %s id %u is named \"%s\", got \"%s\"", g->name, what, v->id, w->name, v->name);
    if (!type_ok(v->type, input))
      return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: type %u, want %s", g->name, w->name, v->type,
                     input ? "APP_WRITE, APP_READWRITE or OPTIONAL_APP_WRITE/READWRITE" : "APP_READ, APP_READWRITE or OPTIONAL_APP_READ/READWRITE");
    if (v->dataFormat != 0)
      return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: data format %u, want 0 (dense)", g->name, w->name, v->dataFormat);
    if (v->dataType != w->dtype)
      return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: data type 0x%04x, want 0x%04x", g->name, w->name, v->dataType, w->dtype);
    if (is_fixed(w->dtype)) {
      const Qnn_QuantizeParams_t *q = &v->quantizeParams;
      if (q->quantizationEncoding != QNN_QUANTIZATION_ENCODING_SCALE_OFFSET || q->scaleOffset.scale != w->scale ||
          q->scaleOffset.offset != w->offset)
        return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: quantization must be SCALE_OFFSET %g/%d", g->name,
                       w->name, (double)w->scale, w->offset);
    }
    if (v->rank != w->rank)
      return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: rank %u, want %u", g->name, w->name, v->rank, w->rank);
    /* NULL input dimensions mean the graph's own; outputs need writable dimensions (a backend may write them) */
    if (!v->dimensions && !input)
      return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: output %s: NULL dimensions", g->name, w->name);
    for (uint32_t d = 0; v->dimensions && d < w->rank; d++)
      if (v->dimensions[d] != w->dims[d])
        return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: dimension %u is %u, want %u", g->name, w->name, d,
                       v->dimensions[d], w->dims[d]);
    if (v->memType == QNN_TENSORMEMTYPE_RAW) {
      if (!v->clientBuf.data || v->clientBuf.dataSize < w->nbytes)
        return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: client buffer %p of %u bytes, need %llu", g->name,
                       w->name, v->clientBuf.data, v->clientBuf.dataSize, (unsigned long long)w->nbytes);
      ptrs[idx] = v->clientBuf.data;
    } else if (v->memType == QNN_TENSORMEMTYPE_MEMHANDLE) {
      pthread_mutex_lock(&g_mu);
      int ok = reg_has(v->memHandle, T_MEM);
      pthread_mutex_unlock(&g_mu);
      const hs_mem *m = v->memHandle;
      if (!ok) return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: memHandle is not registered", g->name, w->name);
      if (m->ctx != gh->ctx)
        return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: memHandle belongs to another context", g->name, w->name);
      if (m->dtype != w->dtype || m->nbytes < w->nbytes)
        return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: registered as 0x%04x/%llu bytes, need 0x%04x/%llu", g->name,
                       w->name, m->dtype, (unsigned long long)m->nbytes, w->dtype, (unsigned long long)w->nbytes);
      ptrs[idx] = m->ptr;
    } else
      return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "graph %s: tensor %s: memType %u not supported", g->name, w->name, v->memType);
  }
  return QNN_SUCCESS;
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int fail_now(int64_t call) {
  char buf[1024];
  const char *s = sw("HOSTSIM_FAIL_EXECUTE_AT", buf, sizeof buf);
  while (s && *s) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s) { s++; continue; }
    if (v == call) return 1;
    s = end;
  }
  return 0;
}

/* script_next returns the forced token for this lm-head call, or -1. Caller holds g_mu. */
static long script_next(const char *path) {
  if (!path || !*path) return -1;
  if (!g_script_path || strcmp(path, g_script_path)) {
    free(g_script_path);
    g_script_path = strdup(path);
    free(g_script);
    g_script = NULL;
    g_script_n = g_script_pos = 0;
    et_reset(); /* a new script: nothing offered yet */
    FILE *f = fopen(path, "r");
    if (f) {
      size_t cap = 0;
      unsigned long v;
      while (fscanf(f, "%lu", &v) == 1) {
        if (g_script_n == cap) {
          cap = cap ? 2 * cap : 64;
          uint32_t *n = realloc(g_script, cap * sizeof *n);
          if (!n) break;
          g_script = n;
        }
        g_script[g_script_n++] = (uint32_t)v;
      }
      fclose(f);
    }
  }
  if (!g_script_n) return -1;
  return g_script[g_script_pos++ % g_script_n];
}

static Qnn_ErrorHandle_t run_lmhead(hs_graph_h *gh, void **in, void **out) {
  const hs_model *m = &gh->ctx->model;
  const hs_graph *g = gh->g;
  float *x = malloc(sizeof(float) * m->d.hidden), *lg = malloc(sizeof(float) * m->d.vocab);
  if (!x || !lg) { free(x); free(lg); return set_err(QNN_COMMON_ERROR_MEM_ALLOC, "lm-head: out of memory"); }
  hs_load(&g->in[0], in[0], 0, m->d.hidden, x); /* one input (role x), one output (role logits) */
  hs_lmhead(m, x, lg);
  char path[1024];
  const char *sp = sw("HOSTSIM_SCRIPT", path, sizeof path);
  pthread_mutex_lock(&g_mu);
  long forced = script_next(sp);
  pthread_mutex_unlock(&g_mu);
  if (forced >= 0 && forced < (long)m->d.vocab) {
    float mx = lg[0];
    for (uint32_t i = 1; i < m->d.vocab; i++) if (lg[i] > mx) mx = lg[i];
    lg[forced] = mx + 16.0f;
  }
  hs_store(&g->out[0], out[0], 0, m->d.vocab, lg);
  free(x);
  free(lg);
  return QNN_SUCCESS;
}

/* mask_value dequantises one mask element like a real graph (any encoding: the value is added to the
 * score); values <= -1000 block exactly. */
static float mask_value(const hs_tensor *t, const void *p, size_t i) {
  float v;
  hs_load(t, p, i, 1, &v);
  return v <= -1000.0f || isnan(v) ? -INFINITY : v;
}

/* store_live stores the nl compacted rows of src ([nl, inner]) at rows live[a] of an [AR, inner]
 * output and poisons the other rows (padding, hs_poison). */
static void store_live(const hs_tensor *t, void *p, int AR, int nl, const int *live, int inner, const float *src) {
  int r = 0;
  for (int a = 0; a < nl; a++, r++) {
    if (live[a] > r) hs_poison(t, p, (size_t)r * inner, (size_t)(live[a] - r) * inner);
    r = live[a];
    hs_store(t, p, (size_t)r * inner, (size_t)inner, src + (size_t)a * inner);
  }
  if (r < AR) hs_poison(t, p, (size_t)r * inner, (size_t)(AR - r) * inner);
}

static Qnn_ErrorHandle_t run_llama(hs_graph_h *gh, void **in, void **out) {
  const hs_model *m = &gh->ctx->model;
  const hs_desc *d = &m->d;
  const hs_graph *g = gh->g;
  int AR = g->kind == HS_KIND_DECODE ? 1 : (int)g->window;
  int H = (int)d->hidden, D = (int)d->head_dim, KV = (int)(d->kv_heads * d->head_dim), CTX = (int)d->ctx, L = (int)d->layers;
  int past = g->kind == HS_KIND_DECODE || g->contract == HS_CONTRACT_CHUNKED;
#define IN(role, l) hs_find_role(g->in, g->nin, role, l)
#define OUT(role, l) hs_find_role(g->out, g->nout, role, l)
  int ix = IN(HS_ROLE_X, 0), ic = IN(HS_ROLE_COS, 0), is = IN(HS_ROLE_SIN, 0), im = IN(HS_ROLE_CMASK, 0), iy = OUT(HS_ROLE_Y, 0);
  size_t sm = hs_scratch_mark();
  float *x = hs_scratch_alloc(sizeof(float) * (size_t)AR * H), *cs = hs_scratch_alloc(sizeof(float) * (size_t)AR * D);
  float *sn = hs_scratch_alloc(sizeof(float) * (size_t)AR * D), *y = hs_scratch_alloc(sizeof(float) * (size_t)AR * H);
  float *smask = hs_scratch_alloc(sizeof(float) * (size_t)AR * AR);
  float *pfull = past ? hs_scratch_alloc(sizeof(float) * (size_t)AR * CTX) : NULL;
  int *open = past ? hs_scratch_alloc(sizeof(int) * (size_t)CTX) : NULL;
  float **nk = hs_scratch_calloc((size_t)L + 1, sizeof(float *)), **nv = hs_scratch_calloc((size_t)L + 1, sizeof(float *));
  float **pk = hs_scratch_calloc((size_t)L + 1, sizeof(float *)), **pv = hs_scratch_calloc((size_t)L + 1, sizeof(float *));
  float *pmask = NULL;
  int npast = 0, *live = NULL;
  Qnn_ErrorHandle_t e = QNN_SUCCESS;
  if (!x || !cs || !sn || !y || !smask || (past && (!pfull || !open)) || !nk || !nv || !pk || !pv) goto oom;
  hs_load(&g->in[ix], in[ix], 0, (size_t)AR * H, x);
  hs_load(&g->in[ic], in[ic], 0, (size_t)AR * D, cs);
  hs_load(&g->in[is], in[is], 0, (size_t)AR * D, sn);
  const hs_tensor *mt = &g->in[im];
  if (g->kind == HS_KIND_DECODE) {
    smask[0] = 0;
    for (int j = 0; j < CTX; j++) pfull[j] = mask_value(mt, in[im], (size_t)j);
  } else if (past) {
    for (int i = 0; i < AR; i++) {
      for (int j = 0; j < CTX; j++) pfull[(size_t)i * CTX + j] = mask_value(mt, in[im], (size_t)i * (CTX + AR) + j);
      for (int j = 0; j < AR; j++) smask[(size_t)i * AR + j] = mask_value(mt, in[im], (size_t)i * (CTX + AR) + CTX + j);
    }
  } else {
    for (size_t i = 0; i < (size_t)AR * AR; i++) smask[i] = mask_value(mt, in[im], i);
  }
  /* A window row that opens nothing is padding (hs_live): not computed, its outputs poisoned. Decode
   * always attends its own token. */
  live = hs_scratch_alloc(sizeof(int) * (size_t)AR);
  unsigned char *opens = hs_scratch_calloc((size_t)AR, 1);
  if (!live || !opens) goto oom;
  for (int i = 0; i < AR; i++) {
    for (int j = 0; j < AR && !opens[i]; j++) opens[i] = smask[(size_t)i * AR + j] != -INFINITY;
    for (int j = 0; past && j < CTX && !opens[i]; j++) opens[i] = pfull[(size_t)i * CTX + j] != -INFINITY;
  }
  if (g->kind == HS_KIND_DECODE) opens[0] = 1;
  int nl = hs_live(AR, opens, smask, live);
  if (nl < 0) goto oom;
  if (past) {
    for (int j = 0; j < CTX; j++) {
      int o = 0;
      for (int i = 0; i < AR && !o; i++) o = pfull[(size_t)i * CTX + j] != -INFINITY;
      if (o) open[npast++] = j;
    }
    pmask = hs_scratch_alloc(sizeof(float) * ((size_t)AR * npast + 1));
    if (!pmask) goto oom;
    for (int i = 0; i < AR; i++)
      for (int p = 0; p < npast; p++) pmask[(size_t)i * npast + p] = pfull[(size_t)i * CTX + open[p]];
  }
  hs_compact(AR, nl, live, x, H, cs, sn, D, pmask, npast, smask);
  for (int l = 0; l < L; l++) {
    nk[l] = hs_scratch_alloc(sizeof(float) * ((size_t)nl * KV + 1));
    nv[l] = hs_scratch_alloc(sizeof(float) * ((size_t)nl * KV + 1));
    if (!nk[l] || !nv[l]) goto oom;
    if (past) {
      pk[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KV + 1));
      pv[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KV + 1));
      if (!pk[l] || !pv[l]) goto oom;
      int ik = IN(HS_ROLE_PAST_K, (uint32_t)l), iv = IN(HS_ROLE_PAST_V, (uint32_t)l);
      for (int p = 0; p < npast; p++) {
        hs_load(&g->in[ik], in[ik], (size_t)open[p] * KV, (size_t)KV, pk[l] + (size_t)p * KV);
        hs_load(&g->in[iv], in[iv], (size_t)open[p] * KV, (size_t)KV, pv[l] + (size_t)p * KV);
      }
    }
  }
  hs_forward(m, nl, x, cs, sn, npast, pmask, pk, pv, smask, y, nk, nv);
  store_live(&g->out[iy], out[iy], AR, nl, live, H, y);
  for (int l = 0; l < L; l++) {
    int ok = OUT(HS_ROLE_NEW_K, (uint32_t)l), ov = OUT(HS_ROLE_NEW_V, (uint32_t)l);
    store_live(&g->out[ok], out[ok], AR, nl, live, KV, nk[l]);
    store_live(&g->out[ov], out[ov], AR, nl, live, KV, nv[l]);
  }
  goto done;
oom:
  e = set_err(QNN_COMMON_ERROR_MEM_ALLOC, "graph %s: out of memory", g->name);
done:
  hs_scratch_release(sm);
  return e;
#undef IN
#undef OUT
}

/* HOSTSIM_SCRIPT on ExecuTorch graphs: a script's reply starts where the reply starts, whatever calls
 * read the prompt, and a verify call's rows follow the script while their drafts do. A call's rows
 * (valid ones, whose mask row attends to something, in call order) get script[base], then
 * script[base + 1], … while each row's input is the token the row before it got (the chain), and after
 * the chain breaks the chain's last token; every row's token is an offer (the next call may feed it
 * back, at the position after its row). base advances only when an offer was taken:
 *  - a later call's first row feeds an offered token back at the position right after its row
 *    (decoding, or the correction after a rejected draft): base = that offer's index + 1;
 *  - a later call starts anywhere else (a new prompt, or rows read again: the reply ended with the
 *    furthest chained offer): base = that offer's index + 1.
 * A call that continues the same prompt right after the last call's rows (the next prefill chunk, or
 * prompt rows through kv_forward) keeps base. The first shard, which sees the tokens, positions and
 * mask, decides; the last shard writes the tokens into the valid rows. */

/* et_offer is one offered token: the next call takes it by feeding tok at pos. */
typedef struct {
  int32_t pos;
  long tok;
  size_t idx; /* its script index */
} et_offer;

static et_offer *g_et_offers; /* the last call's offers, one per valid row */
static int g_et_noffers, g_et_far;   /* count, index of the furthest chained offer */
static int32_t g_et_after = -1;      /* the position after the last call's last valid row */
static size_t g_et_base;             /* the last call's base */
static long *g_et_rowtok;            /* per row of this call: the token its last shard writes, -1 none */
static int g_et_rows;

static void et_reset(void) { /* caller holds g_mu */
  g_et_noffers = g_et_far = 0;
  g_et_after = -1;
  g_et_base = 0;
  for (int i = 0; i < g_et_rows; i++) g_et_rowtok[i] = -1;
}

/* script_rows is et_script_first's decision for a call of AR rows: the rows' tokens and positions,
 * and which rows are valid (valid[0..nv)); NULL valid: decide which from the mask rows (ExecuTorch). */
static void script_rows(int AR, const int32_t *tok, const int32_t *pos, const int *gvalid, int gnv,
                        const hs_tensor *mt, const void *mbuf, int CL);

static void et_script_first(const hs_graph *g, const hs_et_io *io, void **in) {
  script_rows((int)io->ar, in[io->tokens], in[io->pos], NULL, 0, &g->in[io->mask], in[io->mask], (int)io->cl);
}

static void script_rows(int AR, const int32_t *tok, const int32_t *pos, const int *gvalid, int gnv,
                        const hs_tensor *mt, const void *mbuf, int CL) {
  char path[1024];
  const char *sp = sw("HOSTSIM_SCRIPT", path, sizeof path);
  float *row = gvalid ? NULL : malloc(sizeof(float) * (size_t)CL);
  int *valid = malloc(sizeof(int) * (size_t)AR + 1);
  pthread_mutex_lock(&g_mu);
  if (g_et_rows < AR) {
    long *n = realloc(g_et_rowtok, sizeof(long) * (size_t)AR);
    et_offer *o = realloc(g_et_offers, sizeof(et_offer) * ((size_t)AR + 2));
    if (n) g_et_rowtok = n;
    if (o) g_et_offers = o;
    if (n && o) g_et_rows = AR;
  }
  for (int i = 0; i < g_et_rows; i++) g_et_rowtok[i] = -1;
  long t = script_next(sp); /* loads the script (a new path resets the state); the position is unused */
  if (t < 0 || (!row && !gvalid) || !valid || g_et_rows < AR) goto done;
  int nv = 0;
  if (gvalid) {
    memcpy(valid, gvalid, sizeof(int) * (size_t)gnv);
    nv = gnv;
  } else
    for (int i = 0; i < AR; i++) {
      hs_load(mt, mbuf, (size_t)i * CL, (size_t)CL, row);
      int v = 0;
      for (int j = 0; j < CL && !v; j++) v = row[j] > -100.0f && !isnan(row[j]); /* ET_BLOCKED */
      if (v) valid[nv++] = i; /* else a padding row */
    }
  if (!nv) goto done;
  int f = valid[0];
  size_t base = g_et_base;
  if (g_et_noffers) {
    int hit = -1;
    for (int k = 0; k < g_et_noffers && hit < 0; k++)
      if (g_et_offers[k].pos == pos[f] && g_et_offers[k].tok == tok[f]) hit = k;
    if (hit >= 0) base = g_et_offers[hit].idx + 1;
    else if (pos[f] != g_et_after) base = g_et_offers[g_et_far].idx + 1;
  }
  size_t n = g_script_n, c = 0;
  int chained = 1, no = 0;
  int32_t lastpos = pos[f];
  g_et_far = 0;
  for (int k = 0; k < nv; k++) {
    int i = valid[k];
    if (k > 0 && chained && tok[i] == (long)g_script[(base + c) % n]) c++;
    else if (k > 0) chained = 0;
    size_t idx = base + c;
    if (pos[i] > lastpos) lastpos = pos[i];
    g_et_rowtok[i] = g_script[idx % n];
    g_et_offers[no] = (et_offer){pos[i] + 1, g_et_rowtok[i], idx};
    if (k == 0 || chained) g_et_far = no;
    no++;
  }
  g_et_noffers = no;
  g_et_after = lastpos + 1;
  g_et_base = base;
done:
  pthread_mutex_unlock(&g_mu);
  free(row);
  free(valid);
}

/* et_force writes this call's script tokens into its valid logits rows: max(row) + 16. */
static void et_force(const hs_model *m, const hs_graph *g, void **out, int ar) {
  uint32_t V = m->d.vocab;
  const hs_tensor *lt = &g->out[g->nout - 1];
  float *buf = NULL;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < ar && i < g_et_rows; i++) {
    long t = g_et_rowtok[i];
    if (t < 0 || t >= (long)V) continue;
    if (!buf && !(buf = malloc(sizeof(float) * V))) break;
    hs_load(lt, out[g->nout - 1], (size_t)i * V, V, buf);
    float mx = buf[0];
    for (uint32_t j = 1; j < V; j++) if (buf[j] > mx) mx = buf[j];
    buf[t] = mx + 16.0f;
    hs_store(lt, out[g->nout - 1], (size_t)i * V, V, buf);
  }
  pthread_mutex_unlock(&g_mu);
  free(buf);
}

static Qnn_ErrorHandle_t run_et(hs_graph_h *gh, void **in, void **out) {
  const hs_model *m = &gh->ctx->model;
  hs_et_io io;
  char err[512];
  if (hs_et_bind(&m->d, gh->g, &io, err, sizeof err)) return set_err(QNN_GRAPH_ERROR_INVALID_TENSOR, "%s", err);
  int last = io.last, ar = (int)io.ar;
  if (io.first && io.tokens >= 0 && io.pos >= 0 && io.mask >= 0) et_script_first(gh->g, &io, in);
  hs_et_io_free(&io);
  uint32_t code = hs_et_run(m, gh->g, in, out, -1, err, sizeof err);
  if (!code && last) et_force(m, gh->g, out, ar);
  return code ? set_err(code, "%s", err) : QNN_SUCCESS;
}

/* HOSTSIM_SCRIPT on Genie graphs follows the ExecuTorch rules above. Part 1 records the input ids;
 * the part holding layer 0 decides from its mask: a row attending nothing is padding, and a row's
 * position is the number of columns it attends minus one (it attends its sequence's rows 0…p). The
 * last part writes the tokens. */
static int32_t *g_genie_ids;
static int g_genie_nids;

static void genie_script_first(const hs_model *m, const hs_graph *g, void **in) {
  char path[1024];
  if (!sw("HOSTSIM_SCRIPT", path, sizeof path)) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_et_rows; i++) g_et_rowtok[i] = -1; /* no script: the last part forces nothing */
    pthread_mutex_unlock(&g_mu);
    return;
  }
  hs_genie_io io;
  char err[256];
  if (hs_genie_bind(&m->d, g, &io, err, sizeof err)) return;
  int AR = (int)io.ar, CL = (int)io.cl;
  if (io.first) {
    pthread_mutex_lock(&g_mu);
    int32_t *n = g_genie_nids < AR ? realloc(g_genie_ids, sizeof(int32_t) * (size_t)AR) : g_genie_ids;
    if (n) {
      g_genie_ids = n;
      if (g_genie_nids < AR) g_genie_nids = AR;
      memcpy(g_genie_ids, in[io.ids], sizeof(int32_t) * (size_t)AR);
    }
    pthread_mutex_unlock(&g_mu);
  } else if (io.mask >= 0 && m->d.layer0 == 0 && g_genie_nids >= AR) {
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)AR), *pos = malloc(sizeof(int32_t) * (size_t)AR);
    int *valid = malloc(sizeof(int) * (size_t)AR);
    float *row = malloc(sizeof(float) * (size_t)CL);
    int nv = 0;
    if (tok && pos && valid && row) {
      pthread_mutex_lock(&g_mu);
      memcpy(tok, g_genie_ids, sizeof(int32_t) * (size_t)AR);
      pthread_mutex_unlock(&g_mu);
      const hs_tensor *mt = &g->in[io.mask];
      for (int i = 0; i < AR; i++) {
        int open = 0;
        if (mt->dtype == QNN_DATATYPE_UFIXED_POINT_16) {
          const uint16_t *q = (const uint16_t *)in[io.mask] + (size_t)i * CL;
          for (int j = 0; j < CL; j++) open += q[j] == 65535;
        } else {
          hs_load(mt, in[io.mask], (size_t)i * CL, (size_t)CL, row);
          for (int j = 0; j < CL; j++) open += row[j] == 0;
        }
        pos[i] = open ? open - 1 : 0;
        if (open) valid[nv++] = i;
      }
      script_rows(AR, tok, pos, valid, nv, NULL, NULL, CL);
    }
    free(tok); free(pos); free(valid); free(row);
  }
  hs_genie_io_free(&io);
}

static Qnn_ErrorHandle_t graphExecute(void *graph, const Qnn_Tensor_t *inputs, uint32_t nIn, Qnn_Tensor_t *outputs,
                                      uint32_t nOut, void *profile, void *signal) {
  (void)profile;
  pthread_mutex_lock(&g_exec);
  /* The emulated NPU runs one call at a time: this one starts when it has the NPU (now, or when the
   * previous call's emulated time ends) and lasts at least its floor, the compute included. */
  int64_t t0 = now_us(), until = 0;
  if (t0 < g_npu_free) t0 = g_npu_free;
  pthread_mutex_lock(&g_mu);
  int64_t call = ++g_exec_calls;
  int ok = reg_has(graph, T_GRAPH);
  pthread_mutex_unlock(&g_mu);
  Qnn_ErrorHandle_t e = QNN_SUCCESS;
  hs_graph_h *gh = graph;
  void **inp = NULL, **outp = NULL;
  const char *lat = NULL;
  char latbuf[32];
  if (!ok) { e = set_err(QNN_GRAPH_ERROR_INVALID_HANDLE, "graphExecute: invalid graph handle"); goto end; }
  if (signal) { e = set_err(QNN_COMMON_ERROR_NOT_SUPPORTED, "graphExecute: signals are not supported by hostsim"); goto end; }
  if (nIn == 0 && inputs) { e = set_err(QNN_GRAPH_ERROR_INVALID_ARGUMENT, "graphExecute: nIn = 0 with a non-NULL input array"); goto end; }
  inp = calloc(gh->g->nin + 1, sizeof *inp);
  outp = calloc(gh->g->nout + 1, sizeof *outp);
  if (!inp || !outp) { e = set_err(QNN_COMMON_ERROR_MEM_ALLOC, "graphExecute: out of memory"); goto end; }
  if ((e = bind_tensors(gh, inputs, nIn, 1, inp)) || (e = bind_tensors(gh, outputs, nOut, 0, outp))) goto end;
  if (fail_now(call)) {
    char cb[32];
    const char *c = sw("HOSTSIM_FAIL_CODE", cb, sizeof cb);
    uint32_t code = c && atoi(c) > 0 ? (uint32_t)atoi(c) : QNN_COMMON_ERROR_SYSTEM_COMMUNICATION;
    e = set_err(code, "graphExecute: injected failure at call %lld (HOSTSIM_FAIL_EXECUTE_AT)", (long long)call);
    pthread_mutex_lock(&g_mu);
    g_exec_injected++;
    pthread_mutex_unlock(&g_mu);
    goto end;
  }
  uint32_t kind = gh->g->kind, shards = 1;
  if (hs_is_et(kind)) {
    e = run_et(gh, inp, outp);
    kind = kind == HS_KIND_ET_PREFILL ? HS_KIND_PREFILL : HS_KIND_DECODE;
    shards = gh->ctx->model.d.shards;
  } else if (kind == HS_KIND_GENIE) {
    char gerr[512];
    genie_script_first(&gh->ctx->model, gh->g, inp);
    uint32_t code = hs_genie_run(&gh->ctx->model, gh->g, inp, outp, gerr, sizeof gerr);
    e = code ? set_err(code, "%s", gerr) : QNN_SUCCESS;
    if (!e && !strcmp(gh->g->out[gh->g->nout - 1].name, "logits")) et_force(&gh->ctx->model, gh->g, outp, (int)gh->g->window);
    kind = gh->g->window == 1 ? HS_KIND_DECODE : HS_KIND_PREFILL; /* a part gets 1/N of the step's floor */
    shards = gh->ctx->model.d.shards;
  } else e = kind == HS_KIND_LMHEAD ? run_lmhead(gh, inp, outp) : run_llama(gh, inp, outp);
  if (!e) {
    pthread_mutex_lock(&g_mu);
    g_exec_kind[kind]++;
    pthread_mutex_unlock(&g_mu);
    lat = sw(kind == HS_KIND_PREFILL ? "HOSTSIM_LATENCY_US_PREFILL"
             : kind == HS_KIND_DECODE ? "HOSTSIM_LATENCY_US_DECODE" : "HOSTSIM_LATENCY_US_LMHEAD", latbuf, sizeof latbuf);
  }
end:
  if (e) {
    pthread_mutex_lock(&g_mu);
    g_exec_failed++;
    pthread_mutex_unlock(&g_mu);
    if (ok) log_msg(live_log(gh->ctx->be->log), LOG_ERROR, "hostsim: graphExecute failed with %u", (unsigned)e);
  }
  free(inp);
  free(outp);
  if (lat) {
    until = t0 + atoll(lat) / (shards ? shards : 1); /* a shard gets 1/N of the floor */
    if (until > g_npu_free) g_npu_free = until;
  }
  pthread_mutex_unlock(&g_exec);
  int64_t left = until - now_us(); /* only the remainder after the compute is slept */
  if (left > 0) {
    struct timespec ts = {(time_t)(left / 1000000), (long)(left % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
  }
  return e;
}

/* ---- interface ---- */
static Qnn_ErrorHandle_t not_supported(void) { return QNN_COMMON_ERROR_NOT_SUPPORTED; }

static QnnInterface_t g_iface;
static const QnnInterface_t *g_providers[1] = {&g_iface};
static pthread_once_t g_iface_once = PTHREAD_ONCE_INIT;

static void iface_init(void) {
  g_iface.backendId = QNN_BACKEND_ID_HTP;
  g_iface.providerName = "HTP_QTI_AISW";
  g_iface.apiVersion = (Qnn_ApiVersion_t){{2, 32, 0}, {5, 43, 0}};
  for (int i = 0; i < HOSTSIM_QNN_TABLE_SLOTS; i++) g_iface.table[i] = (void *)not_supported;
#define SET(name) g_iface.table[SLOT_##name] = (void *)name
  SET(propertyHasCapability); SET(backendCreate); SET(backendGetApiVersion); SET(backendGetBuildId); SET(backendFree);
  SET(contextCreateFromBinary); SET(contextFree); SET(graphRetrieve); SET(graphExecute); SET(logCreate);
  SET(logSetLogLevel); SET(logFree); SET(memRegister); SET(memDeRegister); SET(deviceGetPlatformInfo);
  SET(deviceFreePlatformInfo); SET(deviceGetInfrastructure); SET(deviceCreate); SET(deviceGetInfo); SET(deviceFree);
  SET(errorGetMessage); SET(errorGetVerboseMessage); SET(errorFreeVerboseMessage); SET(contextGetProperty);
#undef SET
}

EXPORT Qnn_ErrorHandle_t QnnInterface_getProviders(const QnnInterface_t ***list, uint32_t *n) {
  if (!list || !n) return QNN_COMMON_ERROR_INVALID_ARGUMENT;
  pthread_once(&g_iface_once, iface_init);
  *list = g_providers;
  *n = 1;
  return QNN_SUCCESS;
}
