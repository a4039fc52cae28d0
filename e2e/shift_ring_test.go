package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hexserve/hexserve/internal/testjson"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// The ring runners (QHexRT and Genie bundles, RoPE a host input) go on past the window by
// evicting rows at the original positions: nothing is read again until the positions would
// pass config.json's max_position_embeddings, where the engine renumbers by a re-read.

// shiftEvent is one context shift's log line.
type shiftEvent struct {
	Kind     string
	Position int
	Kept     int
	Evicted  int
}

// shiftsSince returns the context shifts s logged after its log's first off bytes.
func (s *hexserve) shiftsSince(off int) []shiftEvent {
	var out []shiftEvent
	for _, line := range strings.Split(s.log.String()[off:], "\n") {
		var l struct {
			Message string
			shiftEvent
		}
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Message, "context shift") {
			out = append(out, l.shiftEvent)
		}
	}
	return out
}

// shiftRun sends one greedy completion with context_shift on and returns its tokens and the
// shifts it logged (the server runs nothing else meanwhile).
func (s *hexserve) shiftRun(t *testing.T, prompt []int64, n int) ([]int64, []shiftEvent) {
	t.Helper()
	off := len(s.log.String())
	got, finish := s.shifted(t, prompt, n, true)
	if finish != "length" || len(got) != n {
		t.Fatalf("shifted: %d tokens, finish %q; want %d, length", len(got), finish, n)
	}
	return got, s.shiftsSince(off)
}

// checkRingTokens checks a ring-shifted greedy reply against the float64 reference evicting the
// same rows (after the first sink) before the same positions: at the 8 rows after each shift and
// every 16th row, the served token's reference logit is within 1e-3 of the largest (the tiny
// model's greedy margins are mostly above 0.02; f32 runners stay within 1e-4 of the reference).
func checkRingTokens(t *testing.T, prompt, got []int64, sink int, shifts []shiftEvent) {
	t.Helper()
	if len(shifts) == 0 {
		t.Fatal("no shifts to check")
	}
	m, err := tinyllama.NewModel(tinyllama.Tiny())
	if err != nil {
		t.Fatal(err)
	}
	toks := int32s(append(slices.Clone(prompt), got...))
	var at []int
	for _, e := range shifts {
		if e.Kind != "ring" || e.Evicted != shifts[0].Evicted {
			t.Fatalf("shifts %+v: want ring shifts of one size", shifts)
		}
		at = append(at, e.Position)
	}
	near := func(pos int) bool {
		return slices.ContainsFunc(at, func(p int) bool { return pos >= p && pos < p+8 })
	}
	want := func(pos int) bool { return pos >= len(prompt)-1 && pos+1 < len(toks) && (pos%16 == 0 || near(pos)) }
	var bad []string
	err = m.RingLogits(toks, sink, shifts[0].Evicted, at, want, func(pos, _ int, l []float64) {
		if d := l[tinyllama.Argmax(l)] - l[toks[pos+1]]; d > 1e-3 {
			bad = append(bad, fmt.Sprintf("position %d: token %d is %.4g below the reference's best", pos+1, toks[pos+1], d))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%d tokens are not the reference's (shifts before %v):\n%s", len(bad), at, strings.Join(bad[:min(len(bad), 8)], "\n"))
	}
}

// genieShift is the 512-token float32 Genie bundle the shift tests serve (float32: its logits are
// the reference's, and a row's bits do not depend on its neighbours).
func genieShift(t testing.TB) string {
	return mkgenie(t, "--precision", "f32", "--prefill-chunk", "32", "--ctx", "512")
}

// TestContextShiftRing: on the 512-token QHexRT dev bundle and a 512-token Genie bundle, a
// completion with context_shift goes on past the window to max_tokens (1,200 tokens after a
// 130-token prompt: 2.6 windows) by ring shifts alone (/metrics and the log count them, none a
// re-read); its tokens until the first shift are the unshifted reply's (which stops at the
// window), after it they are the float64 reference's that evicts the same rows after the sink
// (BOS and n_keep 8), and two runs give the same tokens.
func TestContextShiftRing(t *testing.T) {
	if testing.Short() {
		t.Skip("1,200 tokens past the window on two models, twice each, checked against the float64 reference (-short; the full pass runs it)")
	}
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) config
	}{
		{"qhexrt", func(t *testing.T) config { return config{Bundle: bundle(t), Model: "  aliases: [x]"} }},
		{"genie", func(t *testing.T) config {
			return config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", genieShift(t))}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, tc.cfg(t).write(t, hostsimLibs(t)), true)
			prompt := goldenCases(t)[1].PromptIDs
			const n = 1200
			got, shifts := s.shiftRun(t, prompt, n)
			if len(shifts) < 5 {
				t.Fatalf("%d shifts logged, want at least 5: %+v", len(shifts), shifts)
			}
			plain, finish := s.shifted(t, prompt, n, false)
			if finish != "length" || len(plain) < 300 || len(plain) >= n || !slices.Equal(got[:len(plain)], plain) {
				t.Fatalf("unshifted: %d tokens, finish %q, equal to the shifted run's first: %v", len(plain), finish, slices.Equal(got[:min(len(plain), n)], plain))
			}
			checkRingTokens(t, prompt, got, 9, shifts)
			again, shifts2 := s.shiftRun(t, prompt, n)
			if !slices.Equal(again, got) || !slices.Equal(shifts2, shifts) {
				t.Errorf("two shifted runs differ: shifts %+v, then %+v", shifts, shifts2)
			}
			met := s.metrics(t)
			if k := shiftCount(met, "ring"); k != 2*len(shifts) {
				t.Errorf(`hexserve_context_shifts_total{kind="ring"} = %d, want %d`, k, 2*len(shifts))
			}
			if k := shiftCount(met, "reread"); k != 0 {
				t.Errorf(`hexserve_context_shifts_total{kind="reread"} = %d on a ring runner, want 0`, k)
			}
		})
	}
}

// TestContextShiftRingStreams: on the Genie bundle, three streams sent just after a fourth that
// shifts answer as they do alone, and so does the shifting one. They share its 511 slots: the
// shifting one fills them before each shift, so the others wait, or are set aside and evaluated
// again, across its shifts (at least one of them ends after the first).
func TestContextShiftRingStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("four streams past the window, then each alone (-short; the full pass runs it)")
	}
	cfg := config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", genieShift(t)), Extra: "engine:\n  max_sequences: 4"}
	s := serve(t, cfg.write(t, hostsimLibs(t)), true)
	prompt := goldenCases(t)[1].PromptIDs
	const n, m = 1200, 300
	alone, _ := s.shiftRun(t, prompt, n)
	others := [][]int64{goldenCases(t)[0].PromptIDs, prompt[:40], goldenCases(t)[2].PromptIDs[:100]}
	want := make([][]int64, len(others))
	for i, p := range others {
		want[i], _ = s.shifted(t, p, m, false)
	}
	before := shiftCount(s.metrics(t), "ring")
	var shifter []int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		shifter, _ = s.shifted(t, prompt, n, true)
	}()
	time.Sleep(50 * time.Millisecond) // the shifting stream is the oldest
	side := make([][]int64, len(others))
	after := make([]bool, len(others)) // the stream ended after the shifting one's first shift
	var wg sync.WaitGroup
	for i, p := range others {
		wg.Go(func() {
			side[i], _ = s.shifted(t, p, m, false)
			after[i] = shiftCount(s.metrics(t), "ring") > before
		})
	}
	wg.Wait()
	<-done
	for i := range others {
		if !slices.Equal(side[i], want[i]) {
			t.Errorf("stream %d beside a shifting one:\n got  %v\n want %v", i, side[i], want[i])
		}
	}
	if !slices.Equal(shifter, alone) {
		t.Errorf("the shifting stream beside three others differs from alone")
	}
	if !slices.Contains(after, true) {
		t.Errorf("no stream was still going at the first shift (%v): the test shows nothing", after)
	}
}

// TestContextShiftRenumber: a 512-token Genie bundle whose config.json says
// max_position_embeddings 1024 generates past position 1024 with shift on: ring shifts until
// the next would pass 1024, then a re-read renumbers the kept tokens from position 0, then ring
// shifts again; the tokens are the float64 reference's on either side of the re-read, and two
// runs give the same tokens.
func TestContextShiftRenumber(t *testing.T) {
	if testing.Short() {
		t.Skip("1,200 tokens past max_position_embeddings, twice (-short; the full pass runs it)")
	}
	dir := copyBundle(t, genieShift(t))
	testjson.Edit(t, filepath.Join(dir, "config.json"), func(m map[string]any) { m["max_position_embeddings"] = 1024 })
	s := serve(t, config{Model: fmt.Sprintf("  path: %q\n  aliases: [x]", dir)}.write(t, hostsimLibs(t)), true)
	prompt := goldenCases(t)[1].PromptIDs
	const n = 1200 // to position 1330
	got, shifts := s.shiftRun(t, prompt, n)
	var kinds []string
	for _, e := range shifts {
		kinds = append(kinds, e.Kind)
	}
	r := slices.Index(kinds, "reread")
	if r < 1 || r == len(kinds)-1 || slices.Contains(kinds[r+1:], "reread") {
		t.Fatalf("shifts %+v: want ring shifts, one re-read, ring shifts", shifts)
	}
	for _, e := range shifts {
		if e.Kind == "ring" && e.Position+e.Evicted > 1024 || e.Kind == "reread" && e.Position+e.Evicted <= 1024 {
			t.Errorf("%s shift at position %d (evicting %d) with max_position_embeddings 1024", e.Kind, e.Position, e.Evicted)
		}
	}
	// Until the re-read, the ring's reference; after it, a new sequence from position 0 holding the
	// sink, the newest kept rows and the token sampled last, then the ring again.
	p := shifts[r].Position
	all := append(slices.Clone(prompt), got...)
	checkRingTokens(t, prompt, got[:p-len(prompt)], 9, shifts[:r])
	kept := append(slices.Clone(all[:9]), all[p-(shifts[r].Kept-9):p+1]...)
	checkRingTokens(t, kept, all[p+1:], 9, shifts[r+1:])
	again, shifts2 := s.shiftRun(t, prompt, n)
	if !slices.Equal(again, got) || !slices.Equal(shifts2, shifts) {
		t.Errorf("two shifted runs differ: shifts %+v, then %+v", shifts, shifts2)
	}
	if k := shiftCount(s.metrics(t), "reread"); k != 2 {
		t.Errorf(`hexserve_context_shifts_total{kind="reread"} = %d, want 2`, k)
	}
}
