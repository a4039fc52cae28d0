package bench

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"time"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/threadcpu"
)

// stepSample is one decode token's measurements.
type stepSample struct {
	wall, graph, outside, detok time.Duration
	bg                          time.Duration // background KV copy
	io                          Counters
	cpu                         time.Duration   // thread CPU time outside graph calls, without the clock readings' own cost, each part bounded by its wall time
	rawCPU                      time.Duration   // the same as the clock reads it: readings included, not bounded
	ioCPU, outsideCPU           time.Duration   // its parts inside Step and after it
	use                         threadcpu.Usage // thread accounting over the step
	engineUse                   threadcpu.Usage // and between the Steps
	cpuOK                       bool
}

// decodeSteps measures the decode tokens of one request's records: the
// prompt's Steps come first (their last samples the first token), then
// token i runs from decode Step i's start to Step i+1's start. The last
// token has no next Step and is left out. Thread figures need both
// records' thread readings and, when graphs ran, their CPU time.
//
// A model may run graphs after Step has returned, when the engine reads a
// row (qhexrt's lm-head runs in Rows.Logits): those calls count as the
// token's graph time wherever they run, and the rest of the engine's
// Rows.Logits calls as model I/O, as Step's time outside its graph calls
// does, never as the engine's (sampling) time; so each kind's figures mean
// the same whether its lm-head runs inside Step or lazily.
func decodeSteps(recs []evalRec) []stepSample {
	var out []stepSample
	for i := prefillSteps(recs); i+1 < len(recs); i++ {
		a, b := recs[i], recs[i+1]
		lazy := b.c0.sub(a.c1) // the model's calls between the two Steps, in Rows.Logits
		d := a.d.add(lazy)
		s := stepSample{wall: b.start.Sub(a.start), graph: d.Graph, outside: b.start.Sub(a.end) - a.read,
			detok: b.vocab - a.vocab, io: d, bg: b.bg - a.bg}
		if a.useOK && b.useOK && (d.Graph == 0 || d.GraphCPU > 0) {
			// Readings at Step's end are left out: Step runs to endUse.CPU, the engine from endCPU.
			io, out := a.endUse.CPU-a.cpu-a.d.GraphCPU+a.readCPU-lazy.GraphCPU, b.use.CPU-a.endCPU-a.readCPU
			s.rawCPU = io + out
			// Every interval between two thread-clock readings holds one
			// reading's cost (clockCost): the measurement's, not the host's
			// work. The part inside Step has one such interval, one more per
			// graph call (the runner reads the clock around each, for
			// bench only) and per row read, and the part between Steps one
			// plus one per row read; each part loses that many readings.
			io -= time.Duration(1+d.Calls+int64(a.reads)) * a.clock
			out -= time.Duration(1+a.reads) * a.clock
			io, out = max(io, 0), max(out, 0)
			// A part's CPU time cannot exceed its wall time. Where the thread
			// clock charges part of a long graph call after the call has
			// returned (docs/performance.md, "What the thread clock says after
			// a graph call"), that part would count as host work: each part is bounded
			// by its wall time (Step's outside its graph calls, and the time
			// between Steps), which changes nothing where the clock is exact.
			s.ioCPU, s.outsideCPU = min(io, a.end.Sub(a.start)-a.d.Graph+a.read-lazy.Graph), min(out, s.outside)
			s.cpu, s.use, s.cpuOK = s.ioCPU+s.outsideCPU, b.use.Sub(a.use), true
			s.engineUse = b.use.Sub(a.endUse)
		}
		out = append(out, s)
	}
	return out
}

// prefillSteps is how many of a request's records evaluate its prompt (at
// least one): those before the first one-row Step after the first.
func prefillSteps(recs []evalRec) int {
	k := 1
	for k < len(recs) && recs[k].rows > 1 {
		k++
	}
	return k
}

func (r *runner) hostPhase(ctx context.Context, promptN int) error {
	prompt := r.benchPrompt(promptN)
	for _, set := range Settings {
		tv := &timedVocab{v: r.tok}
		rec := &recorder{Model: r.model, counters: r.counters, v: tv, thread: true}
		var steps []stepSample
		var prefill, ttft, clock []float64
		var first []int32
		for run := range r.opt.Runs {
			r.progress("  %s: request %d/%d (%d prompt + %d decode tokens)", set.Name, run+1, r.opt.Runs, len(prompt), r.opt.Tokens)
			e := inference.New(rec, tv, inference.Config{}) // fresh: no cached rows
			runtime.GC()                                    // collect the last engine's buffers now, not during the steps
			seed := int64(run + 1)
			p := set.P
			p.Seed = &seed
			res, t0, arr, err := request(ctx, e, inference.Request{Prompt: prompt, MaxTokens: r.opt.Tokens, Sampling: p, IgnoreEOS: true})
			e.Close()
			recs := rec.take()
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				return errors.New("no model calls recorded")
			}
			if recs[0].useOK {
				clock = append(clock, us(recs[0].clock))
			}
			if len(arr) > 0 {
				ttft = append(ttft, ms(arr[0].Sub(t0)))
			}
			k, n := prefillSteps(recs), 0
			for _, rc := range recs[:k] {
				n += rc.rows
			}
			prefill = append(prefill, float64(n)/recs[k-1].end.Sub(recs[0].start).Seconds())
			steps = append(steps, decodeSteps(recs)...)
			if first == nil && len(res.Choices) > 0 {
				first = res.Choices[0].Tokens
			}
		}
		base, err := r.baseline(ctx, set.P, first, len(prompt))
		if err != nil {
			return err
		}
		kept, err := r.record(ctx, set.P, prompt, first)
		if err != nil {
			return err
		}
		warm, err := r.replayEngine(ctx, set.P, kept, prompt, first, false)
		if err != nil {
			return err
		}
		cold, err := r.replayEngine(ctx, set.P, kept, prompt, first, true)
		if err != nil {
			return err
		}
		var host, cpu, rawCPU, graph, stepMS, smp, io, detok, rest []float64
		var emb, rope, mask, kv, bg, conv, delay, ioCPU, outCPU, smpCPU []float64
		var th ThreadUse
		var wall time.Duration
		for _, s := range steps {
			if s.cpuOK {
				cpu, rawCPU = append(cpu, us(s.cpu)), append(rawCPU, us(s.rawCPU))
				ioCPU, outCPU = append(ioCPU, us(s.ioCPU)), append(outCPU, us(s.outsideCPU))
				smpCPU = append(smpCPU, max(us(s.outsideCPU)-base.cpu, 0))
				delay = append(delay, us(s.use.RunDelay))
				th.InvolSwitches += float64(s.use.InvolSwitches)
				th.VolSwitches += float64(s.use.VolSwitches)
				th.MinorFaults += float64(s.use.MinorFaults)
				th.EngineMinorFaults += float64(s.engineUse.MinorFaults)
			}
			h := s.wall - s.graph
			host = append(host, us(h))
			graph = append(graph, ms(s.graph))
			stepMS = append(stepMS, ms(s.wall))
			wall += s.wall
			sp := max(us(s.outside)-base.wall, 0)
			smp = append(smp, sp)
			io = append(io, us(s.io.IO()))
			detok = append(detok, us(s.detok))
			rest = append(rest, us(h)-sp-us(s.io.IO())-us(s.detok))
			emb, rope, mask = append(emb, us(s.io.Embed)), append(rope, us(s.io.Rope)), append(mask, us(s.io.Mask))
			kv, bg, conv = append(kv, us(s.io.KVCopy)), append(bg, us(s.bg)), append(conv, us(s.io.Convert))
		}
		if n := float64(len(cpu)); n > 0 {
			th = ThreadUse{round3(th.InvolSwitches / n), round3(th.VolSwitches / n), round3(th.MinorFaults / n), newDist(delay).Mean,
				round3(th.EngineMinorFaults / n)}
		}
		h := HostTime{Sampling: set.Name, Vocab: r.info.VocabSize, TotalUS: newDist(host), CPUUS: newDist(cpu), RawCPUUS: newDist(rawCPU), ClockReadUS: median(clock), Thread: th,
			CPUSplit: HostCPU{ModelIO: median(ioCPU), Engine: median(outCPU), Sampling: median(smpCPU), EngineWarm: warm, EngineCold: cold}, GraphMS: newDist(graph),
			Split: HostUS{Sampling: median(smp), ModelIO: median(io), Detokenise: median(detok), Rest: median(rest)},
			IO:    IOSplit{Embed: median(emb), Rope: median(rope), Mask: median(mask), KVCopy: median(kv), KVCopyBackground: median(bg), Convert: median(conv)}}
		r.rep.Host = append(r.rep.Host, h)
		tp := Throughput{Sampling: set.Name, PromptTokens: len(prompt), PrefillTokS: newDist(prefill),
			DecodeStepMS: newDist(stepMS), TTFTMS: newDist(ttft)}
		if wall > 0 {
			tp.DecodeTokS = round3(float64(len(steps)) / wall.Seconds())
		}
		r.rep.Native = append(r.rep.Native, tp)
	}
	return nil
}

// record runs the first request again (seed 1), unmeasured, keeping every
// Step's logits for the replays; it fails if the tokens differ from the
// measured run's.
func (r *runner) record(ctx context.Context, p sample.Params, prompt, tokens []int32) ([]evalRec, error) {
	if len(tokens) < 3 {
		return nil, nil
	}
	r.progress("  recording the logits for the replays")
	rec := &recorder{Model: r.model, counters: r.counters, keep: true}
	e := inference.New(rec, r.tok, inference.Config{})
	seed := int64(1)
	p.Seed = &seed
	res, _, _, err := request(ctx, e, inference.Request{Prompt: prompt, MaxTokens: len(tokens), Sampling: p, IgnoreEOS: true})
	e.Close()
	if err != nil {
		return nil, err
	}
	if len(res.Choices) == 0 || !slices.Equal(res.Choices[0].Tokens, tokens) {
		return nil, errors.New("the recording run gave other tokens than the measured one")
	}
	return rec.take(), nil
}

// evictBytes is the replay's cache-emptying buffer: twice this machine's L3.
const evictBytes = 64 << 20

// replayEngine runs the engine again on the recorded logits of recs (same
// prompt and sampling, seed 1, as the first request), with the caches
// emptied before each step if cold, and returns its median thread CPU time
// per decode token between Steps, µs. It fails if the replay does not
// reproduce the recorded tokens.
func (r *runner) replayEngine(ctx context.Context, p sample.Params, recs []evalRec, prompt, tokens []int32, cold bool) (float64, error) {
	if len(recs) < 3 {
		return 0, nil
	}
	tv := &timedVocab{v: r.tok}
	m := newRecorded(r.info, recs)
	if cold {
		m.evict = make([]byte, evictBytes)
	}
	rec := &recorder{Model: m, v: tv, thread: true}
	e := inference.New(rec, tv, inference.Config{})
	runtime.GC()
	seed := int64(1)
	p.Seed = &seed
	res, _, _, err := request(ctx, e, inference.Request{Prompt: prompt, MaxTokens: len(tokens), Sampling: p, IgnoreEOS: true})
	e.Close()
	if err != nil {
		return 0, err
	}
	if len(res.Choices) == 0 || !slices.Equal(res.Choices[0].Tokens, tokens) {
		return 0, errors.New("replaying the recorded logits gave other tokens")
	}
	var out []float64
	for _, s := range decodeSteps(rec.take()) {
		if s.cpuOK {
			out = append(out, us(s.outsideCPU))
		}
	}
	return median(out), nil
}

// engineUS is the engine's median time per decode token outside Step, µs.
type engineUS struct{ wall, cpu float64 }

// baseline replays tokens on a near-free model over a vocabulary of only
// the distinct tokens, with the same sampling settings and text, and
// returns the engine's median time outside Step per decode token (wall, and
// the thread's CPU time): everything but the sampler's vocabulary-sized work.
func (r *runner) baseline(ctx context.Context, p sample.Params, tokens []int32, promptN int) (engineUS, error) {
	if len(tokens) < 3 {
		return engineUS{}, nil
	}
	script, ids := remap(tokens)
	rp := newReplay(script, len(ids), r.info.ContextLen, promptN)
	tv := &timedVocab{v: mappedVocab{v: r.tok, ids: ids}}
	rec := &recorder{Model: rp, v: tv, thread: true} // as the measured runs
	var outside, outsideCPU []float64
	for run := range max(r.opt.Runs, 2) {
		e := inference.New(rec, tv, inference.Config{})
		runtime.GC()
		seed := int64(run + 1)
		p.Seed = &seed
		_, _, _, err := request(ctx, e, inference.Request{Prompt: make([]int32, promptN), MaxTokens: len(tokens), Sampling: p, IgnoreEOS: true})
		e.Close()
		if err != nil {
			return engineUS{}, err
		}
		for _, s := range decodeSteps(rec.take()) {
			outside = append(outside, us(s.outside))
			if s.cpuOK {
				outsideCPU = append(outsideCPU, us(s.outsideCPU))
			}
		}
	}
	return engineUS{median(outside), median(outsideCPU)}, nil
}
