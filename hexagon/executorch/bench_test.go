package executorch

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/hexagon/slotpool"
	"github.com/hexserve/hexserve/hexagon/writeback"
	"github.com/hexserve/hexserve/inference"
)

// Host-side work of one decode token at Llama-3.2-3B's shape (28 layers, 8 KV heads of 128, CL
// 2048, uint8 KV, uint16 mask), in Go memory: the KV copy, the mask, and the re-striding of a
// switch between prefill_forward (AR 128) and kv_forward.

func shape3B(b *testing.B, valid, workers int) (*Runner, *method) {
	const layers, nkv, hd, cl, ar = 28, 8, 128, 2048, 1
	var k, v [][]byte
	for range layers {
		k, v = append(k, make([]byte, nkv*hd*(cl-1))), append(v, make([]byte, nkv*hd*(cl-1)))
	}
	r := &Runner{layers: layers, nkv: nkv, hd: hd, cl: cl, es: 1, maxS: cl - 1, valid: valid,
		kc: slotpool.NewCache(k, v, nkv, hd, 1, cl-1, workers)}
	b.Cleanup(r.kc.Close)
	r.Batcher = slotpool.NewBatcher(&r.life, r.maxS, 1, r.cache)
	l := &layout{ar: ar, cl: cl, maskT: qnn.TensorInfo{Name: "m", DataType: qnn.UFixed16, Dims: []uint32{1, 1, ar, cl},
		Quant: qnn.Quant{Scale: 255.0 / 65535, Offset: -65535}}}
	m := &method{layout: l}
	var err error
	if m.masks, err = graphio.NewMask(graphio.Elem{Type: qnn.UFixed16, Scale: 255.0 / 65535, Offset: -65535}, graphio.MaskAdditive); err != nil {
		b.Fatal(err)
	}
	for range layers {
		m.kOut = append(m.kOut, make([]byte, nkv*hd*ar))
		m.vOut = append(m.vOut, make([]byte, nkv*hd*ar))
	}
	return r, m
}

// evictBytes empties the CPU caches when written: twice this machine's L3 (32 MiB).
const evictBytes = 64 << 20

// BenchmarkDecodeHost is one decode token's mask and KV copy (a Step's, one sequence's row) with the copy on the critical
// path: queued, then waited for at once (Runner.sync), so the caller and the copier's workers
// (split: GOMAXPROCS − 1 of them, at most 3) or the caller alone (serial) do it. warm: the caches
// hold the K lines from the last token, as on a phone whose NPU ran the graph; cold: 64 MiB are
// written before each token (untimed), as hostsim's graph streams the weights through the caches.
// The copy's overlap with the graph and the sampling is not measured here (hexserve bench is).
func BenchmarkDecodeHost(b *testing.B) {
	for _, cache := range []string{"warm", "cold"} {
		for _, w := range []struct {
			name    string
			workers int
		}{{"split", writeback.Workers()}, {"serial", 0}} {
			b.Run(cache+"/"+w.name, func(b *testing.B) {
				r, m := shape3B(b, 1000, w.workers)
				mask := make([]byte, 2*r.cl)
				id, err := r.Open(r.maxS)
				if err != nil {
					b.Fatal(err)
				}
				run := []inference.Run{{Seq: id, Tokens: []int32{1}}}
				var evict []byte
				if cache == "cold" {
					evict = make([]byte, evictBytes)
				}
				all := make([]int, r.layers)
				for l := range all {
					all[l] = l
				}
				pos := 1000
				b.ResetTimer()
				for i := range b.N {
					if evict != nil {
						b.StopTimer()
						for j := 0; j < len(evict); j += 64 {
							evict[j] = byte(i)
						}
						b.StartTimer()
					}
					run[0].Start = pos
					r.Pool.WriteMask(m.masks, mask, run, m.ar, m.cl, m.cl-m.ar) // writeBatchMask's work
					r.copyRuns(m, all, run)
					r.kc.Start()
					r.sync()
					pos++
					if pos >= r.cl-1 {
						pos = 1000
					}
				}
				b.ReportMetric(float64(r.stats.KVCopy.Microseconds())/float64(b.N), "copy-µs/op")
			})
		}
	}
}

// BenchmarkRestride is one switch each way between kv_forward (2047 slots per row) and
// prefill_forward (AR 128: 1920 slots) with 1000 valid slots.
func BenchmarkRestride(b *testing.B) {
	r, _ := shape3B(b, 1000, 0)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			r.restride(r.cl - 128)
		} else {
			r.restride(r.cl - 1)
		}
	}
}

// BenchmarkCopierOverhead is the coordination cost of one token's 28 layer copies with empty copy
// work: queued to the persistent workers and waited for (persistent), against a goroutine per layer
// and a WaitGroup (spawn), with the work the caller would do meanwhile left out.
func BenchmarkCopierOverhead(b *testing.B) {
	const layers = 28
	var sink atomic.Int64
	work := func(t slotpool.Write) { sink.Add(int64(t.Layer)) }
	b.Run("persistent", func(b *testing.B) {
		c := writeback.New(layers, writeback.Workers(), func(w slotpool.Write) int { return w.Layer }, work)
		defer c.Close()
		ts := make([]slotpool.Write, layers)
		for l := range ts {
			ts[l].Layer = l
		}
		for range b.N {
			c.Submit(ts...)
			c.WaitAll()
		}
	})
	b.Run("spawn", func(b *testing.B) {
		var wg sync.WaitGroup
		for range b.N {
			for l := range layers {
				wg.Go(func() { work(slotpool.Write{Layer: l}) })
			}
			wg.Wait()
		}
	})
}

// BenchmarkPrefillCall is one prefill_forward call of the public tiny model (AR 128, CL 512, float32
// KV and logits: vocabulary 128,256) whose first valid rows carry tokens and the rest are padding:
// hostsim's CPU cost per call and per valid row (docs/performance.md). The KV copies are waited for.
// cpu-ms/op is the process's CPU time (every thread: hostsim's pool computes beside the caller),
// which a loaded machine inflates less than the wall time.
func BenchmarkPrefillCall(b *testing.B) {
	rt := openRuntime(b)
	path := writePTE(b, pteOpts{ctx: 512, ar: 128, shards: 1, kv: simfile.F32, logits: simfile.F32})
	r := openRunner(b, rt, path)
	for _, valid := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("valid=%d", valid), func(b *testing.B) {
			toks := make([]int32, valid)
			for i := range toks {
				toks[i] = int32(1000 + 7*i)
			}
			cpu0, flt0 := processUse()
			for b.Loop() {
				id, err := r.Open(valid)
				if err != nil {
					b.Fatal(err)
				}
				runs := []inference.Run{{Seq: id, Start: 0, Tokens: toks}}
				if err := r.checkRuns(runs); err != nil {
					b.Fatal(err)
				}
				if err := r.runBatch(r.pre, runs); err != nil {
					b.Fatal(err)
				}
				r.sync()
				r.Release(id)
			}
			cpu1, flt1 := processUse()
			b.ReportMetric(float64((cpu1-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(flt1-flt0)/float64(b.N), "faults/op")
		})
	}
}

// processUse is the process's user + system CPU time and minor page faults so far.
func processUse() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt
}
