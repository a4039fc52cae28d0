package bench

import (
	"context"
	"fmt"

	"github.com/hexserve/hexserve/inference"
)

// The burst workload (issue 51): clients that open at once against the
// engine as the server configures it (engine.max_sequences, auto by
// default), as agents and apps do.
const (
	GoalBurstXGenie = 3.3 // 8 clients at once ÷ one client alone, every round, Genie bundle
	burstRounds     = 3
	burstAlone      = 2  // requests alone per round, one after another
	burstClients    = 8  // clients sent at once per round
	burstTokens     = 24 // generated tokens per request
	burstMinPrompt  = 20 // prompt tokens of the shortest client; each next one 5 more (20–55)
	burstPromptStep = 5
)

// Burst is the burst phase's result: burstRounds rounds on one engine,
// each burstAlone requests one after another, then burstClients at once.
type Burst struct {
	Kind         string  `json:"kind"`
	Emulation    Latency `json:"emulation"`
	MaxSequences int     `json:"max_sequences"` // the engine's, as it resolved
	OutputTokens int     `json:"output_tokens"` // per request
	// Per round: the alone requests' mean tok/s (each one's tokens ÷ its
	// wall time from submit to Done), the clients' aggregate tok/s (all
	// their tokens ÷ the wall time from the first submit to the last
	// Done), and the ratio of the two.
	AloneTokS []float64 `json:"alone_tok_per_s"`
	BurstTokS []float64 `json:"burst_tok_per_s"`
	Ratio     []float64 `json:"ratio_x"`
}

// burstPhase runs the burst workload at the emulated costs, on a model
// whose pool holds several sequences.
func (r *runner) burstPhase(ctx context.Context) error {
	if r.model.BatchLimits().Sequences < 2 {
		r.progress("  skipped: the model runs one sequence at a time (BatchLimits().Sequences is 1)")
		return nil
	}
	emu := r.emu
	if !separateLMHead(r.model) {
		emu = Latency{PrefillUS: r.emu.PrefillUS, DecodeUS: r.emu.DecodeUS + r.emu.LMHeadUS}
	}
	defer setLatency(emu)()
	e := inference.New(r.model, r.tok, inference.Config{MaxSequences: r.opt.MaxSequences, QueueLen: 32})
	defer e.Close()
	b := &Burst{Kind: modelKind(r.model), Emulation: emu, MaxSequences: e.MaxSequences(), OutputTokens: burstTokens}
	r.rep.Burst = b
	r.progress("  max_sequences resolved to %d", b.MaxSequences)
	prompts := newBurstPrompts(r.tok.Encode(Paragraph, false, false), r.info.BOS)
	for round := range burstRounds {
		var alone float64
		for range burstAlone {
			tps, err := burstRun(ctx, e, [][]int32{prompts.next(burstMinPrompt + burstPromptStep*burstClients/2)})
			if err != nil {
				return err
			}
			alone += tps / burstAlone
		}
		clients := make([][]int32, burstClients)
		for i := range clients {
			clients[i] = prompts.next(burstMinPrompt + burstPromptStep*i)
		}
		tps, err := burstRun(ctx, e, clients)
		if err != nil {
			return err
		}
		b.AloneTokS = append(b.AloneTokS, round3(alone))
		b.BurstTokS = append(b.BurstTokS, round3(tps))
		b.Ratio = append(b.Ratio, round3(tps/alone))
		r.progress("  round %d: alone %.1f tok/s, %d at once %.1f tok/s: %.2f×", round+1, alone, burstClients, tps, tps/alone)
	}
	return nil
}

// burstPrompts hands out prompts of BOS and consecutive stretches of the
// paragraph's tokens, each from where the last ended, so that no prompt
// starts with another's rows (no prefix-cache reuse between them).
type burstPrompts struct {
	ids []int32
	bos int32
	at  int
}

func newBurstPrompts(ids []int32, bos int32) *burstPrompts {
	return &burstPrompts{ids: ids, bos: bos}
}

// next is a prompt of n tokens.
func (p *burstPrompts) next(n int) []int32 {
	out := []int32{p.bos}
	for len(out) < n {
		if p.at >= len(p.ids) {
			p.at = 0
		}
		k := min(n-len(out), len(p.ids)-p.at)
		out = append(out, p.ids[p.at:p.at+k]...)
		p.at += k
	}
	return out
}

// burstRun sends one request per prompt at once (atOnce).
func burstRun(ctx context.Context, e *inference.Engine, prompts [][]int32) (float64, error) {
	reqs := make([]inference.Request, len(prompts))
	for i, p := range prompts {
		reqs[i] = inference.Request{Prompt: p, MaxTokens: burstTokens, IgnoreEOS: true}
	}
	return atOnce(ctx, e, reqs)
}

// burstGoals are the burst workload's goals: on a Genie bundle every
// round's ratio, and the worst of them.
func burstGoals(b *Burst) []Goal {
	if b == nil || len(b.Ratio) == 0 || b.Kind != "genie" {
		return nil
	}
	worst := b.Ratio[0]
	for _, x := range b.Ratio {
		worst = min(worst, x)
	}
	return []Goal{goal("burst_8_clients_x", worst, ">=", GoalBurstXGenie, "×",
		fmt.Sprintf("the worst of %d rounds (%v): %d clients at once ÷ one alone, %d tokens each, max_sequences %d, genie bundle",
			len(b.Ratio), b.Ratio, burstClients, burstTokens, b.MaxSequences))}
}
