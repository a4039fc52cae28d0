package qnn

import (
	"errors"
	"unsafe"

	"github.com/ebitengine/purego"
)

// PerfMode is the HTP power vote cast at Open.
type PerfMode string

// Perf modes. The DCVS_V3 values are the ones ONNX Runtime and ExecuTorch
// send (docs/qnn-abi.md section 7).
const (
	PerfNone      PerfMode = ""          // no vote: the backend's default clocks
	PerfBurst     PerfMode = "burst"     // max corner, sleep latency 40 µs, RPC polling on
	PerfSustained PerfMode = "sustained" // sustained_high_performance: turbo corner, 100 µs, RPC polling on
	PerfBalanced  PerfMode = "balanced"  // nom+ corner, DCVS on, 1000 µs, no RPC polling
)

// Voltage corners and power modes (QnnHtpPerfInfrastructure).
const (
	cornerMax     = 0xA0
	cornerTurbo   = 0x80
	cornerNomPlus = 0x70
	cornerSVS2    = 0x30
	powerModePerf = 0x10
	powerModeSave = 0x4 // POWER_SAVER

	rpcControlLatencyUS = 100
	rpcPollingTimeUS    = 9999
)

// powerConfigs returns the DCVS_V3 config and the RPC configs for mode.
func powerConfigs(mode PerfMode, id uint32) (dcvs cPowerConfig, rpc []cPowerConfig) {
	var corner, sleep, dcvsEnable, polling uint32
	switch mode {
	case PerfBurst:
		corner, sleep, dcvsEnable, polling = cornerMax, 40, 0, rpcPollingTimeUS
	case PerfSustained:
		corner, sleep, dcvsEnable, polling = cornerTurbo, 100, 0, rpcPollingTimeUS
	case PerfBalanced:
		corner, sleep, dcvsEnable, polling = cornerNomPlus, 1000, 1, 0
	}
	dcvs = cPowerConfig{
		option:          powerOptDCVSv3,
		contextID:       id,
		setDcvsEnable:   1,
		dcvsEnable:      dcvsEnable,
		powerMode:       powerModePerf,
		setSleepLatency: 1,
		sleepLatency:    sleep,
		setBusParams:    1,
		busCornerMin:    corner, busCornerTarget: corner, busCornerMax: corner,
		setCoreParams: 1,
		coreCornerMin: corner, coreCornerTgt: corner, coreCornerMax: corner,
	}
	rpc = []cPowerConfig{
		{option: powerOptRPCControlLatency, contextID: rpcControlLatencyUS},
		{option: powerOptRPCPollingTime, contextID: polling},
	}
	return dcvs, rpc
}

// downVoteConfig is the vote that releases the clocks before the power
// config id is destroyed, with ExecuTorch's values: DCVS on, power-saver
// mode, sleep latency 2000 µs, SVS2 bus and core corners.
func downVoteConfig(id uint32) cPowerConfig {
	return cPowerConfig{
		option: powerOptDCVSv3, contextID: id,
		setDcvsEnable: 1, dcvsEnable: 1,
		powerMode:       powerModeSave,
		setSleepLatency: 1, sleepLatency: 2000,
		setBusParams: 1, busCornerMin: cornerSVS2, busCornerTarget: cornerSVS2, busCornerMax: cornerSVS2,
		setCoreParams: 1, coreCornerMin: cornerSVS2, coreCornerTgt: cornerSVS2, coreCornerMax: cornerSVS2,
	}
}

// releasePower takes the vote down and then destroys the power config id,
// the order ExecuTorch's HtpDevice teardown uses.
func (r *Runtime) releasePower() error {
	cfg := (*cPowerConfig)(cAlloc(unsafe.Sizeof(cPowerConfig{})))
	defer cFree(unsafe.Pointer(cfg))
	*cfg = downVoteConfig(r.powerID)
	list := (*[2]unsafe.Pointer)(cAlloc(2 * unsafe.Sizeof(unsafe.Pointer(nil))))
	defer cFree(unsafe.Pointer(list))
	list[0], list[1] = unsafe.Pointer(cfg), nil
	down := r.status("setPowerConfig(down-vote)", r.perf.setPowerConfig(r.powerID, unsafe.Pointer(&list[0])))
	return errors.Join(down, r.status("destroyPowerConfigId", r.perf.destroyPowerConfigID(r.powerID)))
}

// setPerfMode casts the power vote: deviceGetInfrastructure →
// createPowerConfigId(0, 0) → setPowerConfig(DCVS_V3) →
// setPowerConfig(RPC control latency + polling). A backend without the
// infrastructure (NULL slot or NOT_SUPPORTED) is logged and skipped.
func (r *Runtime) setPerfMode(mode PerfMode) error {
	if mode == PerfNone {
		return nil
	}
	skip := func(why string, err error) error {
		r.log.Info().Err(err).Str("perf_mode", string(mode)).Msg("qnn: power vote skipped: " + why)
		return nil
	}
	if r.core.deviceGetInfrastructure == nil {
		return skip("deviceGetInfrastructure is NULL", nil)
	}
	var p unsafe.Pointer
	if err := r.status("deviceGetInfrastructure", r.core.deviceGetInfrastructure(&p)); err != nil {
		if CodeOf(err) == CodeNotSupported {
			return skip("not supported", err)
		}
		return err
	}
	if p == nil {
		return skip("no infrastructure", nil)
	}
	infra := (*cHtpInfrastructure)(p)
	if infra.infraType != 0 || infra.createPowerConfigID == 0 || infra.destroyPowerConfigID == 0 || infra.setPowerConfig == 0 {
		return skip("no HTP perf infrastructure", nil)
	}
	f := &perfFuncs{}
	purego.RegisterFunc(&f.createPowerConfigID, infra.createPowerConfigID)
	purego.RegisterFunc(&f.destroyPowerConfigID, infra.destroyPowerConfigID)
	purego.RegisterFunc(&f.setPowerConfig, infra.setPowerConfig)

	var id uint32
	if err := r.status("createPowerConfigId", f.createPowerConfigID(0, 0, &id)); err != nil {
		if CodeOf(err) == CodeNotSupported {
			return skip("not supported", err)
		}
		return err
	}
	r.perf, r.powerID, r.hasPower = f, id, true

	dcvs, rpc := powerConfigs(mode, id)
	// The configs and the NULL-terminated pointer lists live in C memory.
	n := 1 + len(rpc)
	cfgs := (*[3]cPowerConfig)(cAlloc(unsafe.Sizeof(cPowerConfig{}) * uintptr(n)))
	defer cFree(unsafe.Pointer(cfgs))
	cfgs[0], cfgs[1], cfgs[2] = dcvs, rpc[0], rpc[1]
	lists := (*[5]unsafe.Pointer)(cAlloc(5 * unsafe.Sizeof(unsafe.Pointer(nil))))
	defer cFree(unsafe.Pointer(lists))
	lists[0], lists[1] = unsafe.Pointer(&cfgs[0]), nil
	lists[2], lists[3], lists[4] = unsafe.Pointer(&cfgs[1]), unsafe.Pointer(&cfgs[2]), nil

	if err := r.status("setPowerConfig(DCVS_V3)", f.setPowerConfig(id, unsafe.Pointer(&lists[0]))); err != nil {
		if CodeOf(err) == CodeNotSupported {
			return skip("DCVS_V3 not supported", err)
		}
		return err
	}
	if err := r.status("setPowerConfig(RPC)", f.setPowerConfig(id, unsafe.Pointer(&lists[2]))); err != nil {
		if CodeOf(err) != CodeNotSupported {
			return err
		}
		r.log.Info().Err(err).Msg("qnn: RPC latency/polling config not supported")
	}
	r.log.Debug().Str("perf_mode", string(mode)).Uint32("power_config_id", id).Msg("qnn: power vote cast")
	return nil
}
