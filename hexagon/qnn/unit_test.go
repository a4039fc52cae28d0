package qnn

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/hexserve/hexserve/internal/testerr"
)

func TestHostsimMirrorSizes(t *testing.T) {
	if s := unsafe.Sizeof(hostsimStats{}); s != 96 {
		t.Errorf("hostsimStats is %d B, want 96", s)
	}
	if s := unsafe.Sizeof(hostsimPower{}); s != 76 {
		t.Errorf("hostsimPower is %d B, want 76", s)
	}
}

func TestSelectProvider(t *testing.T) {
	v := func(id, maj, min uint32) providerVersion { return providerVersion{id, Version{maj, min, 0}} }
	for _, tc := range []struct {
		name    string
		ps      []providerVersion
		want    int
		wantErr string
	}{
		{"qairt 2.43", []providerVersion{v(6, 2, 32)}, 0, ""},
		{"oldest accepted", []providerVersion{v(6, 2, 20)}, 0, ""},
		{"newer minor", []providerVersion{v(6, 2, 38)}, 0, ""},
		{"too old (qnn 2.13)", []providerVersion{v(6, 2, 7)}, -1, "found API 2.7.0"},
		{"too old (2.19)", []providerVersion{v(6, 2, 19)}, -1, ">= 20"},
		{"too new major", []providerVersion{v(6, 3, 0)}, -1, "found API 3.0.0"},
		{"wrong backend", []providerVersion{v(3, 2, 32)}, -1, "found backend 3"},
		{"second provider fits", []providerVersion{v(3, 2, 32), v(6, 2, 7), v(6, 2, 25)}, 2, ""},
		{"none", nil, -1, "no providers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := selectProvider(tc.ps, backendIDHTP, minCoreMajor, minCoreMinor, "backend")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	// System libraries report backend 0 and API 1.x.
	if i, err := selectProvider([]providerVersion{v(0, 1, 7)}, 0, minSystemMajor, 0, "system"); err != nil || i != 0 {
		t.Fatalf("system 1.7: %d, %v", i, err)
	}
	if _, err := selectProvider([]providerVersion{v(0, 2, 0)}, 0, minSystemMajor, 0, "system"); err == nil {
		t.Fatal("system 2.0 accepted")
	}
}

func TestDataType(t *testing.T) {
	for _, tc := range []struct {
		dt    DataType
		bits  int
		size  int
		name  string
		fixed bool
	}{
		{Int8, 8, 1, "INT_8", false},
		{Uint16, 16, 2, "UINT_16", false},
		{Float16, 16, 2, "FLOAT_16", false},
		{BFloat16, 16, 2, "BFLOAT_16", false},
		{Float32, 32, 4, "FLOAT_32", false},
		{Int64, 64, 8, "INT_64", false},
		{UFixed16, 16, 2, "UFIXED_POINT_16", true},
		{SFixed8, 8, 1, "SFIXED_POINT_8", true},
		{UFixed4, 4, 0, "UFIXED_POINT_4", true},
		{Bool8, 8, 1, "BOOL_8", false},
		{Undefined, 0, 0, "UNDEFINED", false},
		{DataType(0x0999), 0, 0, "DataType(0x0999)", false},
	} {
		if got := tc.dt.Bits(); got != tc.bits {
			t.Errorf("%s.Bits() = %d, want %d", tc.name, got, tc.bits)
		}
		if got := tc.dt.Size(); got != tc.size {
			t.Errorf("%s.Size() = %d, want %d", tc.name, got, tc.size)
		}
		if got := tc.dt.String(); got != tc.name {
			t.Errorf("String() = %q, want %q", got, tc.name)
		}
		if got := tc.dt.IsFixedPoint(); got != tc.fixed {
			t.Errorf("%s.IsFixedPoint() = %v", tc.name, got)
		}
	}
	for _, tc := range []struct {
		ti   TensorInfo
		want int
	}{
		{TensorInfo{DataType: Float16, Dims: []uint32{128, 2048}}, 128 * 2048 * 2},
		{TensorInfo{DataType: Float32, Dims: nil}, 4},
		{TensorInfo{DataType: UFixed4, Dims: []uint32{3}}, 2},
		{TensorInfo{DataType: UFixed16, Dims: []uint32{1, 512}}, 1024},
	} {
		if got := tc.ti.Bytes(); got != tc.want {
			t.Errorf("%v Bytes() = %d, want %d", tc.ti, got, tc.want)
		}
	}
}

func TestError(t *testing.T) {
	var r *Runtime // nil runtime: no message lookup
	if err := r.status("graphExecute", 0); err != nil {
		t.Fatalf("success: %v", err)
	}
	// Upper bits are internal; only the low 16 are the code.
	err := r.status("graphExecute", 0xABCD_0000_0000_0000|1007)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeSystemCommunication || e.Raw != 0xABCD_0000_0000_03EF {
		t.Fatalf("got %#v", err)
	}
	if !IsDeviceRestart(err) || !IsDeviceRestart(fmt.Errorf("wrapped: %w", r.status("x", 1011))) {
		t.Error("IsDeviceRestart false for 1007/1011")
	}
	if IsDeviceRestart(r.status("x", 6004)) || IsDeviceRestart(errors.New("other")) || IsDeviceRestart(nil) {
		t.Error("IsDeviceRestart true for another error")
	}
	if !errors.Is(fmt.Errorf("w: %w", err), &Error{Code: CodeSystemCommunication}) {
		t.Error("errors.Is by code failed")
	}
	if CodeOf(r.status("x", 30010)) != CodeSystemMalformedBinary {
		t.Error("CodeOf")
	}
	want := "qnn: graphExecute: error 1007 (SYSTEM_COMMUNICATION)"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	e.Message = "DSP restarted"
	if !strings.HasSuffix(e.Error(), ": DSP restarted") {
		t.Errorf("message missing: %q", e.Error())
	}
}

func TestPowerConfigs(t *testing.T) {
	for _, tc := range []struct {
		mode                        PerfMode
		corner, sleep, dcvs, polled uint32
	}{
		{PerfBurst, 0xA0, 40, 0, 9999},
		{PerfSustained, 0x80, 100, 0, 9999},
		{PerfBalanced, 0x70, 1000, 1, 0},
	} {
		d, rpc := powerConfigs(tc.mode, 7)
		if d.option != powerOptDCVSv3 || d.contextID != 7 || d.setDcvsEnable != 1 || d.dcvsEnable != tc.dcvs ||
			d.powerMode != 0x10 || d.setSleepLatency != 1 || d.sleepLatency != tc.sleep ||
			d.setBusParams != 1 || d.setCoreParams != 1 || d.setSleepDisable != 0 {
			t.Errorf("%s: dcvs %+v", tc.mode, d)
		}
		for _, c := range []uint32{d.busCornerMin, d.busCornerTarget, d.busCornerMax, d.coreCornerMin, d.coreCornerTgt, d.coreCornerMax} {
			if c != tc.corner {
				t.Errorf("%s: corner %#x, want %#x", tc.mode, c, tc.corner)
			}
		}
		if len(rpc) != 2 || rpc[0].option != powerOptRPCControlLatency || rpc[0].contextID != 100 ||
			rpc[1].option != powerOptRPCPollingTime || rpc[1].contextID != tc.polled {
			t.Errorf("%s: rpc %+v", tc.mode, rpc)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no backend", Config{}, []string{"Config.Backend"}},
		{"missing library", Config{Backend: "/nonexistent/libQnnHtp.so", System: "/nonexistent/libQnnSystem.so"},
			[]string{"load backend library", "/nonexistent/libQnnHtp.so"}},
		{"missing symbol", Config{Backend: "libm.so.6", System: "libm.so.6"},
			[]string{"QnnInterface_getProviders", "libm.so.6"}},
		{"bad perf mode", Config{Backend: "libm.so.6", PerfMode: "turbo"}, []string{`"turbo"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Open(tc.cfg)
			if err == nil {
				r.Close()
				t.Fatal("Open succeeded")
			}
			testerr.Mentions(t, err, tc.want...)
		})
	}
}

// cstr returns a NUL-terminated copy of s for synthetic C structs.
func cstr(s string) *byte { b := append([]byte(s), 0); return &b[0] }

// TestParseBinaryInfo feeds synthetic binary-info structures of every
// supported version (built in Go memory with the C layout) to the parser.
func TestParseBinaryInfo(t *testing.T) {
	dims := []uint32{1, 64}
	scales := []cScaleOffset{{0.5, -3}, {0.25, 7}}
	mkTensors := func(version uint32) []cTensor {
		ts := make([]cTensor, 2)
		ts[0] = cTensor{version: version, id: 11, name: cstr("x"), tensorType: uint32(TensorAppWrite),
			dataType: uint32(UFixed16), rank: 2, dimensions: &dims[0]}
		ts[0].quant.encodingDefinition = 1
		*(*cScaleOffset)(unsafe.Pointer(&ts[0].quant.u)) = cScaleOffset{0.001, -32768}
		ts[1] = cTensor{version: version, id: 12, name: cstr("y"), tensorType: uint32(TensorAppRead),
			dataType: uint32(SFixed8), rank: 2, dimensions: &dims[0]}
		ts[1].quant.encodingDefinition = 1
		ts[1].quant.encoding = uint32(QuantAxisScaleOffset)
		*(*cAxisScaleOffset)(unsafe.Pointer(&ts[1].quant.u)) = cAxisScaleOffset{axis: 1, numScaleOffsets: 2, scaleOffset: &scales[0]}
		return ts
	}
	check := func(t *testing.T, m binaryMeta, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.graphs) != 2 || m.graphs[0].Name != "prefill" || m.graphs[1].Name != "decode" {
			t.Fatalf("graphs %+v", m.graphs)
		}
		g := m.graphs[1]
		if len(g.Inputs) != 1 || len(g.Outputs) != 1 {
			t.Fatalf("decode I/O %+v", g)
		}
		x, y := g.Inputs[0], g.Outputs[0]
		if x.ID != 11 || x.Name != "x" || x.Type != TensorAppWrite || x.DataType != UFixed16 ||
			fmt.Sprint(x.Dims) != "[1 64]" || x.Quant.Encoding != QuantScaleOffset || x.Quant.Scale != 0.001 || x.Quant.Offset != -32768 {
			t.Errorf("x = %+v", x)
		}
		if y.ID != 12 || y.Quant.Encoding != QuantAxisScaleOffset || y.Quant.Axis != 1 ||
			fmt.Sprint(y.Quant.Scales, y.Quant.Offsets) != "[0.5 0.25] [-3 7]" {
			t.Errorf("y = %+v", y)
		}
		dims[1] = 99 // deep copy: later changes to C memory do not show
		if x.Dims[1] != 64 {
			t.Error("dims not copied")
		}
		dims[1] = 64
	}
	for _, tv := range []uint32{1, 2} {
		for _, gv := range []uint32{1, 2, 3} {
			ts := mkTensors(tv)
			graphs := []cGraphInfo{
				{version: gv, name: cstr("prefill")},
				{version: gv, name: cstr("decode"), numInputs: 1, inputs: unsafe.Pointer(&ts[0]), numOutputs: 1, outputs: unsafe.Pointer(&ts[1])},
			}
			for _, bv := range []uint32{1, 2, 3} {
				t.Run(fmt.Sprintf("binary v%d graph v%d tensor v%d", bv, gv, tv), func(t *testing.T) {
					var p unsafe.Pointer
					if bv == 3 {
						p = unsafe.Pointer(&cBinaryInfoV3{version: 3, socVersion: cstr("v79"), socModel: 69, numGraphs: 2, graphs: unsafe.Pointer(&graphs[0])})
					} else {
						p = unsafe.Pointer(&cBinaryInfoV12{version: bv, socVersion: cstr("v79"), numGraphs: 2, graphs: unsafe.Pointer(&graphs[0])})
					}
					m, err := parseBinaryInfo(p)
					check(t, m, err)
					if m.socVersion != "v79" || (bv == 3 && m.socModel != 69) {
						t.Errorf("soc %q %d", m.socVersion, m.socModel)
					}
				})
			}
		}
	}
	for _, tc := range []struct {
		name string
		p    unsafe.Pointer
		want string
	}{
		{"nil", nil, "NULL"},
		{"binary v4", unsafe.Pointer(&cBinaryInfoV3{version: 4}), "binary info version 4"},
		{"graph v9", unsafe.Pointer(&cBinaryInfoV3{version: 3, numGraphs: 1, graphs: unsafe.Pointer(&cGraphInfo{version: 9})}), "graph info version 9"},
		{"tensor v3", unsafe.Pointer(&cBinaryInfoV3{version: 3, numGraphs: 1, graphs: unsafe.Pointer(&cGraphInfo{version: 1, name: cstr("g"), numInputs: 1, inputs: unsafe.Pointer(&cTensor{version: 3})})}), "tensor version 3"},
		{"no dims", unsafe.Pointer(&cBinaryInfoV3{version: 3, numGraphs: 1, graphs: unsafe.Pointer(&cGraphInfo{version: 1, name: cstr("g"), numOutputs: 1, outputs: unsafe.Pointer(&cTensor{version: 2, rank: 2})})}), "NULL dimensions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseBinaryInfo(tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
