package bench

import (
	"math"
	"slices"
	"time"
)

// Dist summarises samples: count, mean, median, 99th percentile, extremes.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// newDist summarises xs (nearest-rank percentiles). No samples: the zero Dist.
func newDist(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Dist{N: len(s), Mean: round3(sum / float64(len(s))), P50: round3(percentile(s, 50)), P99: round3(percentile(s, 99)),
		Min: round3(s[0]), Max: round3(s[len(s)-1])}
}

// percentile is the nearest-rank percentile of sorted s.
func percentile(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func median(xs []float64) float64 { return newDist(xs).P50 }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// round3 keeps three decimals, so reports stay readable.
func round3(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

// Goal is one target next to the measured value.
type Goal struct {
	Name     string  `json:"name"`
	Measured float64 `json:"measured"`
	Op       string  `json:"op"` // "<=" or ">="
	Target   float64 `json:"target"`
	Unit     string  `json:"unit"`
	Pass     bool    `json:"pass"`
	// Ceiling is the best the hardware allows for this figure, from the
	// measured call costs (0: none given).
	Ceiling float64 `json:"ceiling,omitempty"`
	Note    string  `json:"note,omitempty"`
}

func goal(name string, measured float64, op string, target float64, unit, note string) Goal {
	pass := measured <= target
	if op == ">=" {
		pass = measured >= target
	}
	return Goal{Name: name, Measured: round3(measured), Op: op, Target: target, Unit: unit, Pass: pass, Note: note}
}
