package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// GoalShiftRatio bounds a ring-buffer model's time per token past the
// window over its time before it (no re-read: within 10%).
const GoalShiftRatio = 1.10

// Context is the context phase's result: one long greedy generation with
// context shift on, several windows long, timed per token before the
// window and past it.
type Context struct {
	Kind      string  `json:"kind"`  // modelKind
	Shift     string  `json:"shift"` // "ring" (a ContextShifter: nothing read again) or "reread"
	Emulation Latency `json:"emulation"`
	Window    int     `json:"window"`
	Prompt    int     `json:"prompt_tokens"`
	Sink      int     `json:"sink_tokens"` // kept by every shift: BOS and the system prompt
	Output    int     `json:"output_tokens"`
	Shifts    int     `json:"shifts"` // hexserve_context_shifts_total after the runs ÷ runs
	// BeforeMS is each decode token's time before the window (between two
	// token events; the first token excluded), AfterMS each token's past it
	// (the steps that shift or re-read included).
	BeforeMS Dist `json:"before_ms"`
	AfterMS  Dist `json:"after_ms"`
	// AmortisedBeforeMS and AmortisedAfterMS are the wall time of all those
	// tokens ÷ their count; Ratio is after ÷ before, and PerShiftMS the
	// extra time past the window ÷ the shifts (what one re-read costs).
	AmortisedBeforeMS float64 `json:"amortised_before_ms"`
	AmortisedAfterMS  float64 `json:"amortised_after_ms"`
	Ratio             float64 `json:"ratio"`
	PerShiftMS        float64 `json:"per_shift_ms"`
	// MedianRatio is AfterMS.P50 ÷ BeforeMS.P50: the time per token past the
	// window against before it, which a loaded machine's stalls (in the
	// amortised figures) do not move.
	MedianRatio float64 `json:"median_ratio"`
}

// contextTokens is the context phase's output: 4,096 tokens (8 windows of
// the 512-token bundle), at least two windows; quick: 1,024, at least one
// and a half.
func (r *runner) contextTokens() int {
	w := r.info.ContextLen
	if r.opt.Quick {
		return max(1024, w+w/2)
	}
	return max(4096, 2*w)
}

// contextPhase generates contextTokens tokens from a short chat prompt with
// context shift on, r.fewRuns() times on one engine, at the emulated speed,
// and compares the time per token past the window with the time before it.
func (r *runner) contextPhase(ctx context.Context) error {
	defer setLatency(r.emu)()
	sys := chat.Message{Role: "system", Content: "You are a concise assistant."}
	prompt := r.encode([]chat.Message{sys, {Role: "user", Content: "Tell me a very long story."}}, true)
	w := r.info.ContextLen
	if len(prompt)+16 > w/2 {
		r.progress("  skipped: a %d-token prompt leaves too little of the %d-token window", len(prompt), w)
		return nil
	}
	c := &Context{Kind: modelKind(r.model), Shift: "reread", Emulation: r.emu, Window: w, Prompt: len(prompt),
		Sink: inference.CommonPrefix(r.encode([]chat.Message{sys}, false), prompt), Output: r.contextTokens()}
	if _, ok := r.model.(inference.ContextShifter); ok {
		c.Shift = "ring"
	}
	reg := prometheus.NewRegistry()
	e := inference.New(r.model, r.tok, inference.Config{Registerer: reg})
	defer e.Close()
	var before, after []float64
	var spanBefore, spanAfter time.Duration
	first := w - len(prompt) // the index of the first token past the window
	for run := range r.fewRuns() {
		r.progress("  %d tokens past a %d-token window %d/%d (%s)", c.Output, w, run+1, r.fewRuns(), c.Shift)
		req := inference.Request{Prompt: prompt, MaxTokens: c.Output, Sampling: sample.Params{}, IgnoreEOS: true,
			ContextShift: true, Keep: c.Sink}
		_, _, arr, err := request(ctx, e, req)
		if err != nil {
			return err
		}
		if len(arr) != c.Output {
			return fmt.Errorf("bench: context phase: %d tokens of %d", len(arr), c.Output)
		}
		for i := 1; i < len(arr); i++ {
			d := ms(arr[i].Sub(arr[i-1]))
			if i < first {
				before = append(before, d)
			} else {
				after = append(after, d)
			}
		}
		spanBefore += arr[first-1].Sub(arr[0])
		spanAfter += arr[len(arr)-1].Sub(arr[first-1])
	}
	c.BeforeMS, c.AfterMS = newDist(before), newDist(after)
	c.AmortisedBeforeMS = round3(ms(spanBefore) / float64(len(before)))
	c.AmortisedAfterMS = round3(ms(spanAfter) / float64(len(after)))
	if c.AmortisedBeforeMS > 0 {
		c.Ratio = round3(c.AmortisedAfterMS / c.AmortisedBeforeMS)
	}
	if c.BeforeMS.P50 > 0 {
		c.MedianRatio = round3(c.AfterMS.P50 / c.BeforeMS.P50)
	}
	c.Shifts = int(shiftsTotal(reg)) / r.fewRuns()
	if c.Shifts > 0 {
		extra := ms(spanAfter) - c.AmortisedBeforeMS*float64(len(after))
		c.PerShiftMS = round3(extra / float64(c.Shifts*r.fewRuns()))
	}
	r.rep.Context = c
	return nil
}

// shiftsTotal reads hexserve_context_shifts_total (all kinds) from reg.
func shiftsTotal(reg *prometheus.Registry) float64 {
	fams, err := reg.Gather()
	if err != nil {
		return 0
	}
	n := 0.0
	for _, f := range fams {
		if f.GetName() == "hexserve_context_shifts_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// contextGoals: on a ring-buffer model, the median time per token past the
// window within GoalShiftRatio of the median before it (a ring reads
// nothing again: a shift step costs what a decode step does, and the
// median is what stalls of a shared machine do not move; the amortised
// ratio is reported beside it); a re-read's cost is reported, not bounded.
func contextGoals(c *Context) []Goal {
	if c == nil || c.Shift != "ring" || c.MedianRatio == 0 {
		return nil
	}
	return []Goal{goal("context_shift_ratio", c.MedianRatio, "<=", GoalShiftRatio, "×",
		fmt.Sprintf("median ms/token past the %d-token window ÷ before it (%.2f ÷ %.2f; amortised %.2f ÷ %.2f), %d tokens, %d shifts, %s bundle",
			c.Window, c.AfterMS.P50, c.BeforeMS.P50, c.AmortisedAfterMS, c.AmortisedBeforeMS, c.Output, c.Shifts, c.Kind))}
}
