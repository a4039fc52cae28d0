/* abi_probe prints the sizes and field offsets of hostsim's QNN structures, one per line:
 * "Name size" and "Name.field offset". The Go side compiles it with `go env CC` and compares. */
#include <stdio.h>
#include "qnn_abi.h"

#define S(T) printf("%s %zu\n", #T, sizeof(T))
#define O(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f))

int main(void) {
  S(Qnn_Version_t); S(Qnn_ApiVersion_t); O(Qnn_ApiVersion_t, backendApiVersion);
  S(QnnInterface_t); O(QnnInterface_t, providerName); O(QnnInterface_t, apiVersion); O(QnnInterface_t, table);
  O(QnnSystemInterface_t, providerName); O(QnnSystemInterface_t, systemApiVersion); O(QnnSystemInterface_t, table);
  S(Qnn_QuantizeParams_t); O(Qnn_QuantizeParams_t, quantizationEncoding); O(Qnn_QuantizeParams_t, scaleOffset);
  O(Qnn_QuantizeParams_t, scaleOffset.offset);
  S(Qnn_Tensor_t); S(Qnn_TensorV1_t); S(Qnn_TensorV2_t);
  O(Qnn_Tensor_t, v2.id); O(Qnn_Tensor_t, v2.name); O(Qnn_Tensor_t, v2.type); O(Qnn_Tensor_t, v2.dataFormat);
  O(Qnn_Tensor_t, v2.dataType); O(Qnn_Tensor_t, v2.quantizeParams); O(Qnn_Tensor_t, v2.rank);
  O(Qnn_Tensor_t, v2.dimensions); O(Qnn_Tensor_t, v2.memType); O(Qnn_Tensor_t, v2.clientBuf.data);
  O(Qnn_Tensor_t, v2.clientBuf.dataSize); O(Qnn_Tensor_t, v2.memHandle); O(Qnn_Tensor_t, v2.isDynamicDimensions);
  O(Qnn_Tensor_t, v2.sparseParams); O(Qnn_Tensor_t, v2.isProduced);
  S(Qnn_MemDescriptor_t); O(Qnn_MemDescriptor_t, memShape.dimSize); O(Qnn_MemDescriptor_t, memShape.shapeConfig);
  O(Qnn_MemDescriptor_t, dataType); O(Qnn_MemDescriptor_t, memType); O(Qnn_MemDescriptor_t, ionInfo.fd);
  O(Qnn_MemDescriptor_t, customInfo); O(Qnn_MemDescriptor_t, dmaBufInfo.data);
  S(QnnMemHtp_Descriptor_t); O(QnnMemHtp_Descriptor_t, size); O(QnnMemHtp_Descriptor_t, sharedBufferConfig.fd);
  O(QnnMemHtp_Descriptor_t, sharedBufferConfig.offset);
  S(QnnSystemContext_BinaryInfo_t); O(QnnSystemContext_BinaryInfo_t, v3.backendId);
  O(QnnSystemContext_BinaryInfo_t, v3.buildId); O(QnnSystemContext_BinaryInfo_t, v3.coreApiVersion);
  O(QnnSystemContext_BinaryInfo_t, v3.backendApiVersion); O(QnnSystemContext_BinaryInfo_t, v3.socVersion);
  O(QnnSystemContext_BinaryInfo_t, v3.contextBlobVersion); O(QnnSystemContext_BinaryInfo_t, v3.contextBlobSize);
  O(QnnSystemContext_BinaryInfo_t, v3.numContextTensors); O(QnnSystemContext_BinaryInfo_t, v3.contextTensors);
  O(QnnSystemContext_BinaryInfo_t, v3.numGraphs); O(QnnSystemContext_BinaryInfo_t, v3.graphs);
  O(QnnSystemContext_BinaryInfo_t, v3.platformInfo); O(QnnSystemContext_BinaryInfo_t, v3.contextMetadataSize);
  O(QnnSystemContext_BinaryInfo_t, v3.contextMetadata); O(QnnSystemContext_BinaryInfo_t, v3.socModel);
  S(QnnSystemContext_GraphInfo_t); O(QnnSystemContext_GraphInfo_t, v3.graphName);
  O(QnnSystemContext_GraphInfo_t, v3.numGraphInputs); O(QnnSystemContext_GraphInfo_t, v3.graphInputs);
  O(QnnSystemContext_GraphInfo_t, v3.numGraphOutputs); O(QnnSystemContext_GraphInfo_t, v3.graphOutputs);
  S(QnnHtpDevice_Infrastructure_t); O(QnnHtpDevice_Infrastructure_t, perfInfra.createPowerConfigId);
  O(QnnHtpDevice_Infrastructure_t, perfInfra.destroyPowerConfigId);
  O(QnnHtpDevice_Infrastructure_t, perfInfra.setPowerConfig);
  O(QnnHtpDevice_Infrastructure_t, perfInfra.setMemoryConfig);
  S(QnnHtpPerfInfrastructure_PowerConfig_t); O(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.contextId);
  O(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.dcvsEnable);
  O(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.powerMode);
  O(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.sleepLatency);
  O(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.busVoltageCornerMin);
  O(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.coreVoltageCornerMin);
  O(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config.coreVoltageCornerMax);
  S(QnnContext_Config_t); S(QnnDevice_Config_t); S(QnnHtpDevice_CustomConfig_t);
  O(QnnHtpDevice_CustomConfig_t, arch.arch);
  S(QnnContext_Property_t); S(QnnHtpContext_CustomProperty_t); O(QnnHtpContext_CustomProperty_t, value);
  S(QnnDevice_PlatformInfo_t); O(QnnDevice_PlatformInfo_t, v1.hwDevices);
  S(QnnDevice_HardwareDeviceInfo_t); O(QnnDevice_HardwareDeviceInfo_t, v1.cores);
  O(QnnDevice_HardwareDeviceInfo_t, v1.deviceInfoExtension);
  S(QnnHtpDevice_DeviceInfoExtension_t); printf("QnnHtpDevice_DeviceInfoExtension_t.socModel %zu\n", offsetof(QnnHtpDevice_DeviceInfoExtension_t, onChipDevice.socModel));
  printf("QnnHtpDevice_DeviceInfoExtension_t.arch %zu\n", offsetof(QnnHtpDevice_DeviceInfoExtension_t, onChipDevice.arch));
  return 0;
}
