package bench

import (
	"context"
	"time"

	"github.com/hexserve/hexserve/inference"
)

// streamPhase measures streaming efficiency in-process or over HTTP: per
// request, tokens ÷ (last token delivered − request sent) over tokens ÷
// (last token's model call done − request sent).
func (r *runner) streamPhase(ctx context.Context, promptN int, overHTTP bool) error {
	defer setLatency(r.emu)()
	tokens := min(r.opt.Tokens, 48)
	st := Streaming{Transport: "in-process", Emulation: r.emu, Tokens: tokens}
	if overHTTP {
		st.Transport = "http-sse"
	}
	rec := &recorder{Model: r.model, counters: r.counters}
	e := inference.New(rec, r.tok, inference.Config{})
	defer e.Close()
	var effs, eng, del, dec, ttfts, delays, releases []float64
	for run := range r.opt.Runs {
		r.progress("  %s: request %d/%d (%d tokens)", st.Transport, run+1, r.opt.Runs, tokens)
		var t0, end time.Time
		var arr []time.Time
		if overHTTP {
			var err error
			t0, arr, end, err = r.sseRequest(ctx, e, tokens, run)
			if err != nil {
				rec.take()
				st.Error = err.Error()
				r.progress("  http-sse: %v", err)
				break
			}
		} else {
			p := r.benchPrompt(promptN)
			p[len(p)-1] = int32(run + 1000) // a different prompt each run
			var err error
			_, t0, arr, err = request(ctx, e, inference.Request{Prompt: p, MaxTokens: tokens, IgnoreEOS: true})
			if err != nil {
				return err
			}
		}
		recs := rec.take()
		if len(recs) < 2 || len(arr) == 0 {
			continue
		}
		first, last := arr[0], arr[len(arr)-1]
		if end.After(last) {
			last = end // the finish chunk of a turn that ended on end-of-turn
		}
		n := min(len(arr), len(recs)) // token i comes from model call i
		for i := range n {
			delays = append(delays, ms(arr[i].Sub(recs[i].end)))
			if i+1 < n && arr[i+1].Equal(arr[i]) { // same chunk as the next token
				st.HeldTokens++
			} else {
				releases = append(releases, ms(arr[i].Sub(recs[i].end)))
			}
		}
		nr := float64(len(recs))
		prod := recs[len(recs)-1].end.Sub(t0).Seconds()
		got := last.Sub(t0).Seconds()
		eng = append(eng, nr/prod)
		del = append(del, nr/got)
		effs = append(effs, prod/got)
		dec = append(dec, (nr-1)/recs[len(recs)-1].end.Sub(recs[0].end).Seconds())
		ttfts = append(ttfts, ms(first.Sub(t0)))
		st.Requests++
	}
	st.EngineTokS, st.DeliveredTokS, st.Efficiency = round3(median(eng)), round3(median(del)), round3(median(effs))
	st.DecodeTokS = round3(median(dec))
	st.TTFTMS = newDist(ttfts)
	st.TokenDelayMS, st.ReleaseDelayMS = newDist(delays), newDist(releases)
	r.rep.Streaming = append(r.rep.Streaming, st)
	return nil
}
