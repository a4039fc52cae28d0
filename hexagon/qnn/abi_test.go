package qnn

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/hexserve/hexserve/internal/hostsimtest"
)

// layout maps a C name, as the hostsim probe prints it ("Type" for the
// size, "Type.field" for an offset), to the Go mirror's value and to the
// number in docs/qnn-abi.md.
type layout struct {
	name string
	got  uintptr
	want uintptr
}

func layouts() []layout {
	var (
		iface  cInterface
		sys    cSystemInterface
		q      cQuantizeParams
		t      cTensor
		md     cMemDescriptor
		htp    cMemHtpDescriptor
		bi3    cBinaryInfoV3
		bi12   cBinaryInfoV12
		gi     cGraphInfo
		infra  cHtpInfrastructure
		pc     cPowerConfig
		pi     cPlatformInfo
		hw     cHwDeviceInfo
		awSO   cAxisScaleOffset
		bwSO   cBwScaleOffset
		bwAxis cBwAxisScaleOffset
	)
	return []layout{
		{"Qnn_Version_t", unsafe.Sizeof(cVersion{}), 12},
		{"QnnInterface_t.providerName", unsafe.Offsetof(iface.providerName), 8},
		{"QnnInterface_t.apiVersion", unsafe.Offsetof(iface.coreAPI), 16},
		{"QnnInterface_t.apiVersion.backendApiVersion", unsafe.Offsetof(iface.backendAPI), 28},
		{"QnnInterface_t.table", unsafe.Sizeof(iface), coreTableOffset},
		{"QnnSystemInterface_t.providerName", unsafe.Offsetof(sys.providerName), 8},
		{"QnnSystemInterface_t.systemApiVersion", unsafe.Offsetof(sys.systemAPI), 16},
		{"QnnSystemInterface_t.table", unsafe.Sizeof(sys), systemTableOffset},

		{"Qnn_QuantizeParams_t", unsafe.Sizeof(q), 40},
		{"Qnn_QuantizeParams_t.quantizationEncoding", unsafe.Offsetof(q.encoding), 4},
		{"Qnn_QuantizeParams_t.scaleOffset", unsafe.Offsetof(q.u), 8},
		{"Qnn_QuantizeParams_t.scaleOffset.offset", unsafe.Offsetof(q.u) + unsafe.Offsetof(cScaleOffset{}.offset), 12},
		{"Qnn_AxisScaleOffset_t", unsafe.Sizeof(awSO), 16},
		{"Qnn_AxisScaleOffset_t.scaleOffset", unsafe.Offsetof(awSO.scaleOffset), 8},
		{"Qnn_BwScaleOffset_t", unsafe.Sizeof(bwSO), 12},
		{"Qnn_BwAxisScaleOffset_t", unsafe.Sizeof(bwAxis), 32},
		{"Qnn_BwAxisScaleOffset_t.scales", unsafe.Offsetof(bwAxis.scales), 16},
		{"Qnn_BwAxisScaleOffset_t.offsets", unsafe.Offsetof(bwAxis.offsets), 24},

		{"Qnn_Tensor_t", unsafe.Sizeof(t), 144},
		{"Qnn_Tensor_t.v2.id", unsafe.Offsetof(t.id), 8},
		{"Qnn_Tensor_t.v2.name", unsafe.Offsetof(t.name), 16},
		{"Qnn_Tensor_t.v2.type", unsafe.Offsetof(t.tensorType), 24},
		{"Qnn_Tensor_t.v2.dataFormat", unsafe.Offsetof(t.dataFormat), 28},
		{"Qnn_Tensor_t.v2.dataType", unsafe.Offsetof(t.dataType), 32},
		{"Qnn_Tensor_t.v2.quantizeParams", unsafe.Offsetof(t.quant), 40},
		{"Qnn_Tensor_t.v2.rank", unsafe.Offsetof(t.rank), 80},
		{"Qnn_Tensor_t.v2.dimensions", unsafe.Offsetof(t.dimensions), 88},
		{"Qnn_Tensor_t.v2.memType", unsafe.Offsetof(t.memType), 96},
		{"Qnn_Tensor_t.v2.clientBuf.data", unsafe.Offsetof(t.data), 104},
		{"Qnn_Tensor_t.v2.clientBuf.dataSize", unsafe.Offsetof(t.dataSize), 112},
		{"Qnn_Tensor_t.v2.memHandle", unsafe.Offsetof(t.data), 104},
		{"Qnn_Tensor_t.v2.isDynamicDimensions", unsafe.Offsetof(t.isDynamic), 120},
		{"Qnn_Tensor_t.v2.sparseParams", unsafe.Offsetof(t.sparseType), 128},
		{"Qnn_Tensor_t.v2.isProduced", unsafe.Offsetof(t.isProduced), 140},

		{"Qnn_MemDescriptor_t", unsafe.Sizeof(md), 48},
		{"Qnn_MemDescriptor_t.memShape.dimSize", unsafe.Offsetof(md.dimSize), 8},
		{"Qnn_MemDescriptor_t.memShape.shapeConfig", unsafe.Offsetof(md.shapeConfig), 16},
		{"Qnn_MemDescriptor_t.dataType", unsafe.Offsetof(md.dataType), 24},
		{"Qnn_MemDescriptor_t.memType", unsafe.Offsetof(md.memType), 28},
		{"Qnn_MemDescriptor_t.ionInfo.fd", unsafe.Offsetof(md.info), 32},
		{"Qnn_MemDescriptor_t.customInfo", unsafe.Offsetof(md.info), 32},
		{"Qnn_MemDescriptor_t.dmaBufInfo.data", unsafe.Offsetof(md.dmaBufData), 40},
		{"QnnMemHtp_Descriptor_t", unsafe.Sizeof(htp), 32},
		{"QnnMemHtp_Descriptor_t.size", unsafe.Offsetof(htp.size), 8},
		{"QnnMemHtp_Descriptor_t.sharedBufferConfig.fd", unsafe.Offsetof(htp.fd), 16},
		{"QnnMemHtp_Descriptor_t.sharedBufferConfig.offset", unsafe.Offsetof(htp.offset), 24},

		{"QnnSystemContext_BinaryInfo_t", unsafe.Sizeof(bi3), 144},
		{"QnnSystemContext_BinaryInfo_t.v3.backendId", unsafe.Offsetof(bi3.backendID), 8},
		{"QnnSystemContext_BinaryInfo_t.v3.buildId", unsafe.Offsetof(bi3.buildID), 16},
		{"QnnSystemContext_BinaryInfo_t.v3.coreApiVersion", unsafe.Offsetof(bi3.coreAPI), 24},
		{"QnnSystemContext_BinaryInfo_t.v3.backendApiVersion", unsafe.Offsetof(bi3.backendAPI), 36},
		{"QnnSystemContext_BinaryInfo_t.v3.socVersion", unsafe.Offsetof(bi3.socVersion), 48},
		{"QnnSystemContext_BinaryInfo_t.v3.contextBlobVersion", unsafe.Offsetof(bi3.contextBlobVersion), 56},
		{"QnnSystemContext_BinaryInfo_t.v3.contextBlobSize", unsafe.Offsetof(bi3.contextBlobSize), 72},
		{"QnnSystemContext_BinaryInfo_t.v3.numContextTensors", unsafe.Offsetof(bi3.numContextTensors), 80},
		{"QnnSystemContext_BinaryInfo_t.v3.contextTensors", unsafe.Offsetof(bi3.contextTensors), 88},
		{"QnnSystemContext_BinaryInfo_t.v3.numGraphs", unsafe.Offsetof(bi3.numGraphs), 96},
		{"QnnSystemContext_BinaryInfo_t.v3.graphs", unsafe.Offsetof(bi3.graphs), 104},
		{"QnnSystemContext_BinaryInfo_t.v3.platformInfo", unsafe.Offsetof(bi3.platformInfo), 112},
		{"QnnSystemContext_BinaryInfo_t.v3.contextMetadataSize", unsafe.Offsetof(bi3.contextMetadataSize), 120},
		{"QnnSystemContext_BinaryInfo_t.v3.contextMetadata", unsafe.Offsetof(bi3.contextMetadata), 128},
		{"QnnSystemContext_BinaryInfo_t.v3.socModel", unsafe.Offsetof(bi3.socModel), 136},
		{"QnnSystemContext_BinaryInfo_t(v1/v2)", unsafe.Sizeof(bi12), 144},
		{"QnnSystemContext_BinaryInfo_t.v1.socVersion", unsafe.Offsetof(bi12.socVersion), 48},
		{"QnnSystemContext_BinaryInfo_t.v1.hwInfoBlobVersion", unsafe.Offsetof(bi12.hwInfoBlobVersion), 56},
		{"QnnSystemContext_BinaryInfo_t.v1.contextBlobVersion", unsafe.Offsetof(bi12.contextBlobVersion), 68},
		{"QnnSystemContext_BinaryInfo_t.v1.hwInfoBlobSize", unsafe.Offsetof(bi12.hwInfoBlobSize), 80},
		{"QnnSystemContext_BinaryInfo_t.v1.hwInfoBlob", unsafe.Offsetof(bi12.hwInfoBlob), 88},
		{"QnnSystemContext_BinaryInfo_t.v1.contextBlobSize", unsafe.Offsetof(bi12.contextBlobSize), 96},
		{"QnnSystemContext_BinaryInfo_t.v1.numContextTensors", unsafe.Offsetof(bi12.numContextTensors), 104},
		{"QnnSystemContext_BinaryInfo_t.v1.contextTensors", unsafe.Offsetof(bi12.contextTensors), 112},
		{"QnnSystemContext_BinaryInfo_t.v1.numGraphs", unsafe.Offsetof(bi12.numGraphs), 120},
		{"QnnSystemContext_BinaryInfo_t.v1.graphs", unsafe.Offsetof(bi12.graphs), 128},
		{"QnnSystemContext_BinaryInfo_t.v2.platformInfo", unsafe.Offsetof(bi12.platformInfo), 136},

		{"QnnSystemContext_GraphInfo_t", unsafe.Sizeof(gi), 88},
		{"QnnSystemContext_GraphInfo_t.v3.graphName", unsafe.Offsetof(gi.name), 8},
		{"QnnSystemContext_GraphInfo_t.v3.numGraphInputs", unsafe.Offsetof(gi.numInputs), 16},
		{"QnnSystemContext_GraphInfo_t.v3.graphInputs", unsafe.Offsetof(gi.inputs), 24},
		{"QnnSystemContext_GraphInfo_t.v3.numGraphOutputs", unsafe.Offsetof(gi.numOutputs), 32},
		{"QnnSystemContext_GraphInfo_t.v3.graphOutputs", unsafe.Offsetof(gi.outputs), 40},
		{"QnnSystemContext_GraphInfo_t.v3.numUpdateableTensors", unsafe.Offsetof(gi.numUpdateable), 48},
		{"QnnSystemContext_GraphInfo_t.v3.updateableTensors", unsafe.Offsetof(gi.updateable), 56},
		{"QnnSystemContext_GraphInfo_t.v3.graphBlobInfoSize", unsafe.Offsetof(gi.blobInfoSize), 64},
		{"QnnSystemContext_GraphInfo_t.v3.graphBlobInfo", unsafe.Offsetof(gi.blobInfo), 72},
		{"QnnSystemContext_GraphInfo_t.v3.startOpIndex", unsafe.Offsetof(gi.startOpIndex), 80},
		{"QnnSystemContext_GraphInfo_t.v3.endOpIndex", unsafe.Offsetof(gi.endOpIndex), 84},

		{"QnnHtpDevice_Infrastructure_t", unsafe.Sizeof(infra), 40},
		{"QnnHtpDevice_Infrastructure_t.perfInfra.createPowerConfigId", unsafe.Offsetof(infra.createPowerConfigID), 8},
		{"QnnHtpDevice_Infrastructure_t.perfInfra.destroyPowerConfigId", unsafe.Offsetof(infra.destroyPowerConfigID), 16},
		{"QnnHtpDevice_Infrastructure_t.perfInfra.setPowerConfig", unsafe.Offsetof(infra.setPowerConfig), 24},
		{"QnnHtpDevice_Infrastructure_t.perfInfra.setMemoryConfig", unsafe.Offsetof(infra.setMemoryConfig), 32},
		{"QnnHtpPerfInfrastructure_PowerConfig_t", unsafe.Sizeof(pc), 68},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.contextId", unsafe.Offsetof(pc.contextID), 4},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.setDcvsEnable", unsafe.Offsetof(pc.setDcvsEnable), 8},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.dcvsEnable", unsafe.Offsetof(pc.dcvsEnable), 12},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.powerMode", unsafe.Offsetof(pc.powerMode), 16},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.setSleepLatency", unsafe.Offsetof(pc.setSleepLatency), 20},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.sleepLatency", unsafe.Offsetof(pc.sleepLatency), 24},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.setSleepDisable", unsafe.Offsetof(pc.setSleepDisable), 28},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.sleepDisable", unsafe.Offsetof(pc.sleepDisable), 32},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.setBusParams", unsafe.Offsetof(pc.setBusParams), 36},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.busVoltageCornerMin", unsafe.Offsetof(pc.busCornerMin), 40},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.busVoltageCornerTarget", unsafe.Offsetof(pc.busCornerTarget), 44},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.busVoltageCornerMax", unsafe.Offsetof(pc.busCornerMax), 48},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.setCoreParams", unsafe.Offsetof(pc.setCoreParams), 52},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.coreVoltageCornerMin", unsafe.Offsetof(pc.coreCornerMin), 56},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.coreVoltageCornerTarget", unsafe.Offsetof(pc.coreCornerTgt), 60},
		{"QnnHtpPerfInfrastructure_PowerConfig_t.dcvsV3Config.coreVoltageCornerMax", unsafe.Offsetof(pc.coreCornerMax), 64},

		// Platform info: public QnnDevice.h layout, not in docs/qnn-abi.md's
		// measured set.
		{"QnnDevice_PlatformInfo_t", unsafe.Sizeof(pi), 24},
		{"QnnDevice_PlatformInfo_t.v1.hwDevices", unsafe.Offsetof(pi.hwDevices), 16},
		{"QnnDevice_HardwareDeviceInfo_t", unsafe.Sizeof(hw), 40},
		{"QnnDevice_HardwareDeviceInfo_t.v1.cores", unsafe.Offsetof(hw.cores), 24},
		{"QnnDevice_HardwareDeviceInfo_t.v1.deviceInfoExtension", unsafe.Offsetof(hw.extension), 32},
	}
}

// htpExtLayouts is QnnHtpDevice_DeviceInfoExtension_t as in the public
// QnnHtpDevice.h (devType, then OnChipDeviceInfoExtension {size_t
// vtcmSize; uint32_t socModel; bool signedPd; bool dlbc; arch}).
func htpExtLayouts() []layout {
	var e cHtpDeviceInfoExt
	return []layout{
		{"QnnHtpDevice_DeviceInfoExtension_t", unsafe.Sizeof(e), 32},
		{"QnnHtpDevice_DeviceInfoExtension_t.socModel", unsafe.Offsetof(e.socModel), 16},
		{"QnnHtpDevice_DeviceInfoExtension_t.arch", unsafe.Offsetof(e.arch), 24},
	}
}

// TestLayout checks every mirrored struct against docs/qnn-abi.md's numbers.
func TestLayout(t *testing.T) {
	for _, l := range append(layouts(), htpExtLayouts()...) {
		if l.got != l.want {
			t.Errorf("%s = %d, want %d", l.name, l.got, l.want)
		}
	}
	if tensorStride != 144 || graphInfoStride != 88 {
		t.Errorf("strides: tensor %d, graph info %d", tensorStride, graphInfoStride)
	}
}

// TestLayoutProbe compiles hostsim's C probe (hexagon/hostsim/abi_probe.c,
// which includes its qnn_abi.h) and compares its numbers with the Go
// mirrors.
func TestLayoutProbe(t *testing.T) {
	probe := probeLayouts(t)
	check := func(ls []layout) (mismatch []string) {
		for _, l := range ls {
			v, ok := probe[l.name]
			if !ok {
				continue
			}
			if v != l.got {
				mismatch = append(mismatch, l.name+": C "+strconv.Itoa(int(v))+", Go "+strconv.Itoa(int(l.got)))
			}
		}
		return mismatch
	}
	matched := 0
	for _, l := range layouts() {
		if _, ok := probe[l.name]; ok {
			matched++
		}
	}
	if matched < 60 {
		t.Errorf("only %d of the probe's %d lines name a mirrored field; probe format changed?", matched, len(probe))
	}
	// Every mirrored struct, the HTP device-info extension included, must
	// match: a mismatch is a bug in one of the two mirrors, never a skip.
	for _, m := range check(append(layouts(), htpExtLayouts()...)) {
		t.Error(m)
	}
}

// probeLayouts builds and runs the probe, returning "name" → value.
func probeLayouts(t *testing.T) map[string]uintptr {
	t.Helper()
	root := hostsimtest.RepoRoot(t)
	src := filepath.Join(root, "hexagon", "hostsim", "abi_probe.c")
	if _, err := os.Stat(src); err != nil {
		src = filepath.Join(root, "hexagon", "qnn", "testdata", "abi_probe.c")
		if _, err := os.Stat(src); err != nil {
			t.Skip("no C probe (hexagon/hostsim/abi_probe.c) in this checkout")
		}
	}
	cc := goEnv(t, "CC")
	if cc == "" {
		t.Skip("go env CC is empty: no C compiler")
	}
	if _, err := exec.LookPath(strings.Fields(cc)[0]); err != nil {
		t.Skipf("C compiler %q not found", cc)
	}
	bin := filepath.Join(t.TempDir(), "abi_probe")
	args := append(strings.Fields(cc)[1:], "-I", filepath.Join(root, "hexagon", "hostsim"), "-o", bin, src)
	if out, err := exec.Command(strings.Fields(cc)[0], args...).CombinedOutput(); err != nil {
		t.Fatalf("compile %s: %v\n%s", src, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("run probe: %v", err)
	}
	m := map[string]uintptr{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Fatalf("probe line %q", sc.Text())
		}
		m[f[0]] = uintptr(v)
	}
	return m
}
