package bench

import (
	"context"
	"strings"
	"time"
)

// tokenizerPhase encodes the golden paragraph ×256 in 20 KB chunks.
func (r *runner) tokenizerPhase(ctx context.Context) error {
	reps, passes := tokenizerRepeats, 3
	if r.opt.Quick {
		reps, passes = 32, 1
	}
	text := strings.Repeat(Paragraph, reps)
	var rates []float64
	ntok := 0
	var total time.Duration
	for range passes {
		if err := ctx.Err(); err != nil {
			return err
		}
		ntok = 0
		t0 := time.Now()
		for i := 0; i < len(text); i += tokenizerChunk {
			ntok += len(r.tok.Encode(text[i:min(i+tokenizerChunk, len(text))], false, false))
		}
		d := time.Since(t0)
		total += d
		rates = append(rates, float64(len(text))/1e6/d.Seconds())
	}
	r.rep.Tokenizer = TokenizerSpeed{Bytes: len(text), Tokens: ntok, MBps: newDist(rates),
		TokensPerS: round3(float64(ntok*passes) / total.Seconds()), Reference: ReferenceMBps}
	return nil
}
