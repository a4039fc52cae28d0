package bundlesim

import (
	"fmt"
	"io"
	"time"

	"github.com/hexserve/hexserve/internal/tinyllama"
)

// progress prints a `\r`-updated line while a large bundle is written: the
// current file's percentage and the megabytes written so far.
type progress struct {
	w        io.Writer
	enabled  bool
	finished int64 // bytes of completed files
	last     time.Time
	printed  bool
}

// progressMin is the estimated bundle size above which progress is shown.
const progressMin = 64 << 20

func newProgress(w io.Writer, cfg tinyllama.Config) *progress {
	est := 2 * int64(cfg.VocabSize) * int64(cfg.HiddenSize) // embedding table
	for _, t := range tinyllama.Tensors(cfg) {
		est += int64(t.Len())
	}
	return &progress{w: w, enabled: w != nil && est > progressMin}
}

func (p *progress) update(name string, done, total int64) {
	if !p.enabled || time.Since(p.last) < 200*time.Millisecond && done < total {
		return
	}
	p.last = time.Now()
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	fmt.Fprintf(p.w, "\rmkmodel: %-14s %5.1f%%  %8.1f MB written", name, pct, float64(p.finished+done)/1e6)
	p.printed = true
	if done >= total {
		p.finished += total
		p.last = time.Time{}
	}
}

func (p *progress) finish() {
	if p.printed {
		fmt.Fprintln(p.w)
	}
}
