/* qnn_abi.h - the subset of the QNN C ABI (QAIRT 2.43: core API 2.32, HTP 5.43, System 1.7)
 * that hostsim implements, written from docs/qnn-abi.md. Sizes and offsets are
 * checked with _Static_assert for LP64 targets (x86_64, aarch64). */
#ifndef HOSTSIM_QNN_ABI_H
#define HOSTSIM_QNN_ABI_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t Qnn_ErrorHandle_t;
typedef void *Qnn_Handle_t;

/* ---- error codes (section 8) ---- */
enum {
  QNN_SUCCESS = 0,
  QNN_COMMON_ERROR_NOT_SUPPORTED = 1000,
  QNN_COMMON_ERROR_MEM_ALLOC = 1002,
  QNN_COMMON_ERROR_SYSTEM = 1003,
  QNN_COMMON_ERROR_INVALID_ARGUMENT = 1004,
  QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED = 1005,
  QNN_COMMON_ERROR_PLATFORM_NOT_SUPPORTED = 1006,
  QNN_COMMON_ERROR_SYSTEM_COMMUNICATION = 1007,
  QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES = 1008,
  QNN_COMMON_ERROR_LOADING_BINARIES = 1009,
  QNN_COMMON_ERROR_RESOURCE_UNAVAILABLE = 1010,
  QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL = 1011,
  QNN_COMMON_ERROR_GENERAL = 1100,
  QNN_BACKEND_ERROR_CANNOT_INITIALIZE = 4000,
  QNN_BACKEND_ERROR_INVALID_ARGUMENT = 4004,
  QNN_BACKEND_ERROR_INVALID_HANDLE = 4011,
  QNN_BACKEND_ERROR_INVALID_CONFIG = 4012,
  QNN_CONTEXT_ERROR_INVALID_ARGUMENT = 5000,
  QNN_CONTEXT_ERROR_INVALID_HANDLE = 5002,
  QNN_CONTEXT_ERROR_BINARY_VERSION = 5004,
  QNN_CONTEXT_ERROR_CREATE_FROM_BINARY = 5005,
  QNN_CONTEXT_ERROR_INVALID_CONFIG = 5010,
  QNN_GRAPH_ERROR_INVALID_ARGUMENT = 6000,
  QNN_GRAPH_ERROR_INVALID_HANDLE = 6001,
  QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST = 6002,
  QNN_GRAPH_ERROR_INVALID_NAME = 6003,
  QNN_GRAPH_ERROR_INVALID_TENSOR = 6004,
  QNN_MEM_ERROR_INVALID_ARGUMENT = 8000,
  QNN_MEM_ERROR_INVALID_HANDLE = 8001,
  QNN_MEM_ERROR_ALREADY_REGISTERED = 8002,
  QNN_MEM_ERROR_MAPPING = 8003,
  QNN_MEM_ERROR_INVALID_SHAPE = 8004,
  QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE = 8005,
  QNN_ERROR_INVALID_ARGUMENT = 10000,
  QNN_ERROR_INVALID_ERROR_HANDLE = 10001,
  QNN_LOG_ERROR_INVALID_ARGUMENT = 11003,
  QNN_LOG_ERROR_INVALID_HANDLE = 11004,
  QNN_PERF_ERROR_INVALID_HANDLE_PTR = 13000,
  QNN_PERF_ERROR_INVALID_INPUT = 13001,
  QNN_PERF_ERROR_UNSUPPORTED_CONFIG = 13002,
  QNN_DEVICE_ERROR_UNSUPPORTED_FEATURE = QNN_COMMON_ERROR_NOT_SUPPORTED, /* QnnDevice.h: an optional device API */
  QNN_DEVICE_ERROR_INVALID_HANDLE = 14000,
  QNN_DEVICE_ERROR_INVALID_CONFIG = 14001,
  QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE = 14002,
  QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT = 14003,
  QNN_SYSTEM_ERROR_INVALID_HANDLE = 30000,
  QNN_SYSTEM_ERROR_INVALID_ARGUMENT = 30001,
  QNN_SYSTEM_ERROR_OPERATION_FAILED = 30002,
  QNN_SYSTEM_ERROR_MALFORMED_BINARY = 30010,
};

#define QNN_PROPERTY_GROUP_DEVICE 1501u
#define QNN_BACKEND_ID_HTP 6u

/* ---- data types (section 3) ---- */
enum {
  QNN_DATATYPE_INT_8 = 0x0008, QNN_DATATYPE_INT_16 = 0x0016, QNN_DATATYPE_INT_32 = 0x0032,
  QNN_DATATYPE_INT_64 = 0x0064, QNN_DATATYPE_UINT_8 = 0x0108, QNN_DATATYPE_UINT_16 = 0x0116,
  QNN_DATATYPE_UINT_32 = 0x0132, QNN_DATATYPE_UINT_64 = 0x0164, QNN_DATATYPE_FLOAT_16 = 0x0216,
  QNN_DATATYPE_BFLOAT_16 = 0x0226, QNN_DATATYPE_FLOAT_32 = 0x0232, QNN_DATATYPE_FLOAT_64 = 0x0264,
  QNN_DATATYPE_SFIXED_POINT_8 = 0x0308, QNN_DATATYPE_SFIXED_POINT_16 = 0x0316,
  QNN_DATATYPE_SFIXED_POINT_32 = 0x0332, QNN_DATATYPE_UFIXED_POINT_8 = 0x0408,
  QNN_DATATYPE_UFIXED_POINT_16 = 0x0416, QNN_DATATYPE_UFIXED_POINT_32 = 0x0432,
  QNN_DATATYPE_BOOL_8 = 0x0508, QNN_DATATYPE_UNDEFINED = 0x7FFFFFFF,
};

enum {
  QNN_TENSOR_TYPE_APP_WRITE = 0, QNN_TENSOR_TYPE_APP_READ = 1, QNN_TENSOR_TYPE_APP_READWRITE = 2,
  QNN_TENSOR_TYPE_NATIVE = 3, QNN_TENSOR_TYPE_STATIC = 4, QNN_TENSOR_TYPE_OPTIONAL_APP_WRITE = 11,
  QNN_TENSOR_TYPE_OPTIONAL_APP_READ = 12, QNN_TENSOR_TYPE_OPTIONAL_APP_READWRITE = 13,
};
enum { QNN_TENSORMEMTYPE_RAW = 0, QNN_TENSORMEMTYPE_MEMHANDLE = 1, QNN_TENSORMEMTYPE_RETRIEVE_RAW = 2 };
enum { QNN_TENSOR_VERSION_1 = 1, QNN_TENSOR_VERSION_2 = 2 };
enum { QNN_DEFINITION_IMPL_GENERATED = 0, QNN_DEFINITION_DEFINED = 1, QNN_DEFINITION_UNDEFINED = 0x7FFFFFFF };
enum { QNN_QUANTIZATION_ENCODING_SCALE_OFFSET = 0, QNN_QUANTIZATION_ENCODING_UNDEFINED = 0x7FFFFFFF };

typedef struct { uint32_t major, minor, patch; } Qnn_Version_t;
typedef struct { Qnn_Version_t coreApiVersion; Qnn_Version_t backendApiVersion; } Qnn_ApiVersion_t;

typedef struct { float scale; int32_t offset; } Qnn_ScaleOffset_t;

typedef struct {
  uint32_t encodingDefinition;
  uint32_t quantizationEncoding;
  union {
    Qnn_ScaleOffset_t scaleOffset;
    unsigned char raw[32];
    void *align_ptr;
  };
} Qnn_QuantizeParams_t;

typedef struct { void *data; uint32_t dataSize; } Qnn_ClientBuffer_t;

typedef struct {
  uint32_t type; /* 0 HYBRID_COO */
  uint32_t numSpecifiedElements;
  uint32_t numSparseDimensions;
} Qnn_SparseParams_t;

typedef struct {
  uint32_t id;
  const char *name;
  uint32_t type;
  uint32_t dataFormat;
  uint32_t dataType;
  Qnn_QuantizeParams_t quantizeParams;
  uint32_t rank;
  uint32_t *dimensions;
  uint32_t memType;
  union {
    Qnn_ClientBuffer_t clientBuf;
    Qnn_Handle_t memHandle;
  };
} Qnn_TensorV1_t;

typedef struct {
  uint32_t id;
  const char *name;
  uint32_t type;
  uint32_t dataFormat;
  uint32_t dataType;
  Qnn_QuantizeParams_t quantizeParams;
  uint32_t rank;
  uint32_t *dimensions;
  uint32_t memType;
  union {
    Qnn_ClientBuffer_t clientBuf;
    Qnn_Handle_t memHandle;
    void *retrieveRaw;
  };
  uint8_t *isDynamicDimensions;
  Qnn_SparseParams_t sparseParams;
  uint8_t isProduced;
} Qnn_TensorV2_t;

typedef struct {
  uint32_t version;
  union {
    Qnn_TensorV1_t v1;
    Qnn_TensorV2_t v2;
  };
} Qnn_Tensor_t;

/* ---- memory (section 6) ---- */
enum { QNN_MEM_TYPE_ION = 1, QNN_MEM_TYPE_CUSTOM = 2, QNN_MEM_TYPE_DMA_BUF = 3 };
typedef struct { uint32_t numDim; uint32_t *dimSize; const char *shapeConfig; } Qnn_MemShape_t;
typedef struct {
  Qnn_MemShape_t memShape;
  uint32_t dataType;
  uint32_t memType;
  union {
    struct { int32_t fd; } ionInfo;
    void *customInfo;
    struct { int32_t fd; void *data; } dmaBufInfo;
  };
} Qnn_MemDescriptor_t;

enum { QNN_HTP_MEM_QURT = 0, QNN_HTP_MEM_SHARED_BUFFER = 1 };
typedef struct {
  uint32_t type;
  uint64_t size;
  union {
    uint32_t qurtAddress;
    struct { int32_t fd; uint64_t offset; } sharedBufferConfig;
  };
} QnnMemHtp_Descriptor_t;

/* ---- interface (section 1/2) ---- */
#define HOSTSIM_QNN_TABLE_SLOTS 71
typedef void (*QnnFn_t)(void);
typedef struct {
  uint32_t backendId;
  const char *providerName;
  Qnn_ApiVersion_t apiVersion;
  void *table[HOSTSIM_QNN_TABLE_SLOTS];
} QnnInterface_t;

enum {
  SLOT_propertyHasCapability = 0, SLOT_backendCreate = 1, SLOT_backendGetApiVersion = 3,
  SLOT_backendGetBuildId = 4, SLOT_backendFree = 8, SLOT_contextCreateFromBinary = 13,
  SLOT_contextFree = 14, SLOT_graphRetrieve = 20, SLOT_graphExecute = 21, SLOT_logCreate = 25,
  SLOT_logSetLogLevel = 26, SLOT_logFree = 27, SLOT_memRegister = 35, SLOT_memDeRegister = 36,
  SLOT_deviceGetPlatformInfo = 37, SLOT_deviceFreePlatformInfo = 38, SLOT_deviceGetInfrastructure = 39,
  SLOT_deviceCreate = 40, SLOT_deviceGetInfo = 42, SLOT_deviceFree = 43, SLOT_errorGetMessage = 48,
  SLOT_errorGetVerboseMessage = 49, SLOT_errorFreeVerboseMessage = 50, SLOT_contextGetProperty = 63,
};

#define HOSTSIM_SYS_TABLE_SLOTS 16
typedef struct {
  uint32_t backendId;
  const char *providerName;
  Qnn_Version_t systemApiVersion;
  void *table[HOSTSIM_SYS_TABLE_SLOTS];
} QnnSystemInterface_t;

/* ---- system binary info (section 5) ---- */
typedef struct {
  uint32_t version;
  union {
    struct {
      const char *graphName;
      uint32_t numGraphInputs;
      Qnn_Tensor_t *graphInputs;
      uint32_t numGraphOutputs;
      Qnn_Tensor_t *graphOutputs;
      uint32_t numUpdateableTensors;
      Qnn_Tensor_t *updateableTensors;
      uint32_t graphBlobInfoSize;
      void *graphBlobInfo;
      uint32_t startOpIndex, endOpIndex;
    } v3; /* v1 is the prefix up to graphOutputs */
  };
} QnnSystemContext_GraphInfo_t;

typedef struct {
  uint32_t version;
  union {
    struct {
      uint32_t backendId;
      const char *buildId;
      Qnn_Version_t coreApiVersion;
      Qnn_Version_t backendApiVersion;
      const char *socVersion;
      Qnn_Version_t contextBlobVersion;
      uint64_t contextBlobSize;
      uint32_t numContextTensors;
      Qnn_Tensor_t *contextTensors;
      uint32_t numGraphs;
      QnnSystemContext_GraphInfo_t *graphs;
      void *platformInfo;
      uint32_t contextMetadataSize;
      void *contextMetadata;
      uint32_t socModel;
    } v3;
    unsigned char raw[136];
  };
} QnnSystemContext_BinaryInfo_t;

/* ---- HTP perf infrastructure (section 7) ---- */
typedef struct {
  uint32_t contextId, setDcvsEnable, dcvsEnable, powerMode, setSleepLatency, sleepLatency, setSleepDisable,
      sleepDisable, setBusParams, busVoltageCornerMin, busVoltageCornerTarget, busVoltageCornerMax,
      setCoreParams, coreVoltageCornerMin, coreVoltageCornerTarget, coreVoltageCornerMax;
} QnnHtpPerfInfrastructure_DcvsV3_t;

enum {
  QNN_HTP_PERF_CONFIG_DCVS_V3 = 1, QNN_HTP_PERF_CONFIG_RPC_CONTROL_LATENCY = 2,
  QNN_HTP_PERF_CONFIG_RPC_POLLING_TIME = 3, QNN_HTP_PERF_CONFIG_HMX_TIMEOUT_INTERVAL_US = 4,
};
typedef struct {
  uint32_t option;
  union {
    QnnHtpPerfInfrastructure_DcvsV3_t dcvsV3Config;
    uint32_t rpcControlLatencyConfig;
    uint32_t rpcPollingTimeConfig;
    uint32_t hmxTimeoutIntervalUsConfig;
    uint32_t raw[16];
  };
} QnnHtpPerfInfrastructure_PowerConfig_t;

typedef struct { uint32_t option; uint32_t growSizeConfig; } QnnHtpPerfInfrastructure_MemoryConfig_t;

typedef Qnn_ErrorHandle_t (*QnnHtpPerf_CreatePowerConfigIdFn_t)(uint32_t, uint32_t, uint32_t *);
typedef Qnn_ErrorHandle_t (*QnnHtpPerf_DestroyPowerConfigIdFn_t)(uint32_t);
typedef Qnn_ErrorHandle_t (*QnnHtpPerf_SetPowerConfigFn_t)(uint32_t, const QnnHtpPerfInfrastructure_PowerConfig_t **);
typedef Qnn_ErrorHandle_t (*QnnHtpPerf_SetMemoryConfigFn_t)(uint32_t, uint32_t,
                                                             const QnnHtpPerfInfrastructure_MemoryConfig_t **);
typedef struct {
  uint32_t infraType; /* 0 = PERF */
  struct {
    QnnHtpPerf_CreatePowerConfigIdFn_t createPowerConfigId;
    QnnHtpPerf_DestroyPowerConfigIdFn_t destroyPowerConfigId;
    QnnHtpPerf_SetPowerConfigFn_t setPowerConfig;
    QnnHtpPerf_SetMemoryConfigFn_t setMemoryConfig;
  } perfInfra;
} QnnHtpDevice_Infrastructure_t;

/* ---- configs (section 4/7) ---- */
typedef struct { uint32_t option; union { void *customConfig; uint32_t priority; void *ptr; }; } QnnContext_Config_t;
/* context options 0 CUSTOM ... 10 GRAPH_RETENTION_ORDER; backend options 0 CUSTOM, 1 PLATFORM */
enum { QNN_CONTEXT_CONFIG_OPTION_CUSTOM = 0, QNN_CONTEXT_CONFIG_OPTION_LAST = 10 };
typedef struct { uint32_t option; union { void *customConfig; const char **platformOptions; void *ptr; }; } QnnBackend_Config_t;
enum { QNN_BACKEND_CONFIG_OPTION_CUSTOM = 0, QNN_BACKEND_CONFIG_OPTION_PLATFORM = 1 };
typedef struct { uint32_t option; union { void *customConfig; void *platformInfo; }; } QnnDevice_Config_t;
enum { QNN_HTP_DEVICE_CONFIG_OPTION_SOC = 0, QNN_HTP_DEVICE_CONFIG_OPTION_ARCH = 1 };
typedef struct {
  uint32_t option;
  union {
    uint32_t socModel;
    struct { uint32_t deviceId; uint32_t arch; } arch;
    uint32_t raw[2];
  };
} QnnHtpDevice_CustomConfig_t;

typedef struct { uint32_t option; union { void *customProperty; }; } QnnContext_Property_t;
typedef struct { uint32_t option; union { uint64_t value; }; } QnnHtpContext_CustomProperty_t;

/* ---- platform info (hostsim's reconstruction; see FORMAT.md) ---- */
typedef struct {
  uint32_t devType; /* 0 = ON_CHIP */
  struct {
    size_t vtcmSize; /* MB */
    uint32_t socModel;
    uint8_t signedPdSupport;
    uint8_t dlbcSupport;
    uint32_t arch;
  } onChipDevice;
} QnnHtpDevice_DeviceInfoExtension_t;
typedef struct { uint32_t version; struct { uint32_t coreId, coreType; void *ext; } v1; } QnnDevice_CoreInfo_t;
typedef struct {
  uint32_t version;
  struct {
    uint32_t deviceId, deviceType, numCores;
    QnnDevice_CoreInfo_t *cores;
    QnnHtpDevice_DeviceInfoExtension_t *deviceInfoExtension;
  } v1;
} QnnDevice_HardwareDeviceInfo_t;
typedef struct {
  uint32_t version;
  struct { uint32_t numHwDevices; QnnDevice_HardwareDeviceInfo_t *hwDevices; } v1;
} QnnDevice_PlatformInfo_t;

typedef void (*QnnLog_Callback_t)(const char *fmt, uint32_t level, uint64_t timestamp, va_list args);

/* ---- layout checks (docs/qnn-abi.md) ---- */
#define HS_ASSERT_SIZE(T, n) _Static_assert(sizeof(T) == (n), #T " size")
#define HS_ASSERT_OFF(T, f, n) _Static_assert(offsetof(T, f) == (n), #T "." #f " offset")
HS_ASSERT_SIZE(Qnn_Version_t, 12);
HS_ASSERT_SIZE(Qnn_ApiVersion_t, 24);
HS_ASSERT_OFF(Qnn_ApiVersion_t, backendApiVersion, 12);
HS_ASSERT_OFF(QnnInterface_t, providerName, 8);
HS_ASSERT_OFF(QnnInterface_t, apiVersion, 16);
HS_ASSERT_OFF(QnnInterface_t, table, 40);
HS_ASSERT_SIZE(QnnInterface_t, 608);
HS_ASSERT_OFF(QnnSystemInterface_t, providerName, 8);
HS_ASSERT_OFF(QnnSystemInterface_t, systemApiVersion, 16);
HS_ASSERT_OFF(QnnSystemInterface_t, table, 32);
HS_ASSERT_SIZE(Qnn_QuantizeParams_t, 40);
HS_ASSERT_OFF(Qnn_QuantizeParams_t, quantizationEncoding, 4);
HS_ASSERT_OFF(Qnn_QuantizeParams_t, scaleOffset, 8);
HS_ASSERT_SIZE(Qnn_TensorV1_t, 112);
HS_ASSERT_SIZE(Qnn_TensorV2_t, 136);
HS_ASSERT_SIZE(Qnn_Tensor_t, 144);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.id, 8);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.name, 16);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.type, 24);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.dataFormat, 28);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.dataType, 32);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.quantizeParams, 40);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.rank, 80);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.dimensions, 88);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.memType, 96);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.clientBuf.data, 104);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.clientBuf.dataSize, 112);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.memHandle, 104);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.isDynamicDimensions, 120);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.sparseParams, 128);
HS_ASSERT_OFF(Qnn_Tensor_t, v2.isProduced, 140);
HS_ASSERT_OFF(Qnn_Tensor_t, v1.memType, 96);
HS_ASSERT_OFF(Qnn_Tensor_t, v1.clientBuf.dataSize, 112);
HS_ASSERT_SIZE(Qnn_MemDescriptor_t, 48);
HS_ASSERT_OFF(Qnn_MemDescriptor_t, dataType, 24);
HS_ASSERT_OFF(Qnn_MemDescriptor_t, memType, 28);
HS_ASSERT_OFF(Qnn_MemDescriptor_t, ionInfo.fd, 32);
HS_ASSERT_OFF(Qnn_MemDescriptor_t, dmaBufInfo.data, 40);
HS_ASSERT_SIZE(QnnMemHtp_Descriptor_t, 32);
HS_ASSERT_OFF(QnnMemHtp_Descriptor_t, size, 8);
HS_ASSERT_OFF(QnnMemHtp_Descriptor_t, sharedBufferConfig.fd, 16);
HS_ASSERT_OFF(QnnMemHtp_Descriptor_t, sharedBufferConfig.offset, 24);
HS_ASSERT_SIZE(QnnSystemContext_BinaryInfo_t, 144);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.backendId, 8);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.buildId, 16);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.coreApiVersion, 24);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.backendApiVersion, 36);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.socVersion, 48);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.contextBlobVersion, 56);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.contextBlobSize, 72);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.numContextTensors, 80);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.contextTensors, 88);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.numGraphs, 96);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.graphs, 104);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.platformInfo, 112);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.contextMetadataSize, 120);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.contextMetadata, 128);
HS_ASSERT_OFF(QnnSystemContext_BinaryInfo_t, v3.socModel, 136);
HS_ASSERT_SIZE(QnnSystemContext_GraphInfo_t, 88);
HS_ASSERT_OFF(QnnSystemContext_GraphInfo_t, v3.graphName, 8);
HS_ASSERT_OFF(QnnSystemContext_GraphInfo_t, v3.numGraphInputs, 16);
HS_ASSERT_OFF(QnnSystemContext_GraphInfo_t, v3.graphInputs, 24);
HS_ASSERT_OFF(QnnSystemContext_GraphInfo_t, v3.numGraphOutputs, 32);
HS_ASSERT_OFF(QnnSystemContext_GraphInfo_t, v3.graphOutputs, 40);
HS_ASSERT_OFF(QnnSystemContext_GraphInfo_t, v3.numUpdateableTensors, 48);
HS_ASSERT_OFF(QnnSystemContext_GraphInfo_t, v3.graphBlobInfoSize, 64);
HS_ASSERT_OFF(QnnSystemContext_GraphInfo_t, v3.startOpIndex, 80);
HS_ASSERT_SIZE(QnnHtpDevice_Infrastructure_t, 40);
HS_ASSERT_OFF(QnnHtpDevice_Infrastructure_t, perfInfra.createPowerConfigId, 8);
HS_ASSERT_OFF(QnnHtpDevice_Infrastructure_t, perfInfra.destroyPowerConfigId, 16);
HS_ASSERT_OFF(QnnHtpDevice_Infrastructure_t, perfInfra.setPowerConfig, 24);
HS_ASSERT_OFF(QnnHtpDevice_Infrastructure_t, perfInfra.setMemoryConfig, 32);
HS_ASSERT_SIZE(QnnHtpPerfInfrastructure_PowerConfig_t, 68);
HS_ASSERT_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.contextId, 4);
HS_ASSERT_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.dcvsEnable, 12);
HS_ASSERT_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.sleepLatency, 24);
HS_ASSERT_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.busVoltageCornerMin, 40);
HS_ASSERT_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.coreVoltageCornerMax, 64);
HS_ASSERT_SIZE(QnnContext_Config_t, 16);
HS_ASSERT_SIZE(QnnBackend_Config_t, 16);
HS_ASSERT_SIZE(QnnDevice_Config_t, 16);
HS_ASSERT_SIZE(QnnHtpDevice_CustomConfig_t, 12);
HS_ASSERT_SIZE(QnnHtpContext_CustomProperty_t, 16);
HS_ASSERT_SIZE(QnnDevice_PlatformInfo_t, 24);
HS_ASSERT_SIZE(QnnDevice_HardwareDeviceInfo_t, 40);
HS_ASSERT_SIZE(QnnDevice_CoreInfo_t, 24);
HS_ASSERT_SIZE(QnnHtpDevice_DeviceInfoExtension_t, 32);
HS_ASSERT_OFF(QnnHtpDevice_DeviceInfoExtension_t, onChipDevice.socModel, 16);
HS_ASSERT_OFF(QnnHtpDevice_DeviceInfoExtension_t, onChipDevice.signedPdSupport, 20);
HS_ASSERT_OFF(QnnHtpDevice_DeviceInfoExtension_t, onChipDevice.arch, 24);

#endif
