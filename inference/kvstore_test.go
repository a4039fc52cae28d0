package inference_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
	"github.com/hexserve/hexserve/inference/kvstore"
)

func setupKV(t *testing.T, reg prometheus.Registerer) (*inference.Engine, *kvstore.Store) {
	t.Helper()
	m := &seqModel{info: inference.ModelInfo{VocabSize: vocab, ContextLen: 256, EOS: []int32{eot}},
		fill: scriptFill(vocab, eot, []int32{1, 2, 3})}
	st, err := kvstore.Open(kvstore.Config{Layout: m.KVLayout(), Memory: 1 << 20, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e := inference.New(m, inferencetest.NewVocab(words), inference.Config{KVStore: st, Registerer: reg})
	t.Cleanup(func() { e.Close() })
	return e, st
}

func ids(base int32, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = base + int32(i%500)
	}
	return s
}

// TestKVStoreTurns: two conversations take turns; each turn restores its
// own history from the store although the resident cache holds the other's.
func TestKVStoreTurns(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, _ := setupKV(t, reg)
	hist := map[string][]int32{"a": ids(10, 60), "b": ids(300, 50)}
	for turn := range 3 {
		for _, conv := range []string{"a", "b"} {
			r, err := run(t, e, inference.Request{Prompt: hist[conv], MaxTokens: 3, CacheKey: conv})
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if turn > 0 {
				want = len(hist[conv]) - 4 // all but the new user turn and the reply's last token
			}
			if r.Usage.CachedTokens != want {
				t.Fatalf("turn %d of %s: cached_tokens %d, want %d", turn, conv, r.Usage.CachedTokens, want)
			}
			// The next turn: the reply's first two tokens were committed
			// (the last sampled token has no row), then a new user turn.
			next := append(append([]int32(nil), hist[conv]...), r.Choices[0].Tokens...)
			hist[conv] = append(next, 40, 41, 42)
		}
	}
	if got := metricValue(t, reg, "hexserve_kv_store_hits_total"); got != 4 {
		t.Errorf("hits = %v, want 4", got)
	}
	if got := metricValue(t, reg, "hexserve_kv_store_entries"); got != 2 {
		t.Errorf("entries = %v, want 2 (one per conversation key)", got)
	}
}

// TestKVStoreOwners: a request never restores rows another owner computed,
// and its cached_tokens does not reveal them.
func TestKVStoreOwners(t *testing.T) {
	e, _ := setupKV(t, nil)
	secret := ids(20, 80)
	if _, err := run(t, e, inference.Request{Prompt: secret, MaxTokens: 1, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	// Another request replaces the resident cache.
	if _, err := run(t, e, inference.Request{Prompt: ids(600, 30), MaxTokens: 1, Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	guess := append(append([]int32(nil), secret...), 7)
	for _, tc := range []struct {
		owner string
		want  int
	}{{"bob", 0}, {"", 0}, {"alice", len(secret)}} {
		r, err := run(t, e, inference.Request{Prompt: guess, MaxTokens: 1, Owner: tc.owner})
		if err != nil {
			t.Fatal(err)
		}
		if r.Usage.CachedTokens != tc.want {
			t.Errorf("owner %q: cached_tokens %d, want %d", tc.owner, r.Usage.CachedTokens, tc.want)
		}
		// Clobber the resident cache again so the next owner starts cold.
		if _, err := run(t, e, inference.Request{Prompt: ids(700, 30), MaxTokens: 1, Owner: "carol"}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKVStoreConcurrent: many clients of several owners at once. The model
// fails any Step whose reused rows do not hold the prompt's prefix, so a
// half-restored or foreign cache would fail a request.
func TestKVStoreConcurrent(t *testing.T) {
	e, st := setupKV(t, nil)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			owner := fmt.Sprint("owner", c%3)
			for i := range 6 {
				p := append(ids(int32(100*(c%3)), 40+i), int32(c))
				s, err := e.Submit(context.Background(), inference.Request{Prompt: p, MaxTokens: 2, Owner: owner})
				if err != nil {
					i-- // queue full: try again
					continue
				}
				r, err := inference.Collect(s)
				if err != nil {
					t.Errorf("client %d: %v", c, err)
					return
				}
				if r.Usage.CachedTokens > len(p)-1 {
					t.Errorf("client %d: cached %d of %d", c, r.Usage.CachedTokens, len(p))
				}
			}
		})
	}
	wg.Wait()
	if s := st.Stats(); s.Entries == 0 {
		t.Errorf("nothing saved: %+v", s)
	}
}

// TestKVStoreNeedsSnapshotter: a model without SeqKVSnapshotter keeps plain
// behaviour (no store).
func TestKVStoreNeedsSnapshotter(t *testing.T) {
	m := inferencetest.NewScripted(inference.ModelInfo{VocabSize: vocab, ContextLen: 64, EOS: []int32{eot}}, []int32{1})
	st, err := kvstore.Open(kvstore.Config{Layout: inference.KVLayout{Identity: "x", RowBytes: 8}, Memory: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	e := inference.New(m, inferencetest.NewVocab(words), inference.Config{KVStore: st})
	defer e.Close()
	if _, err := run(t, e, inference.Request{Prompt: ids(1, 10), MaxTokens: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.KVStats(); ok || st.Stats().Entries != 0 {
		t.Fatalf("the store was used without a snapshotter: %+v", st.Stats())
	}
}

// metricValue reads a registered counter or gauge, or a histogram's count
// of observations: its first series, or the one whose first label values
// are labels (0 while there is none).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) < len(labels) {
				continue
			}
			for i, l := range m.GetLabel() {
				if i < len(labels) && l.GetValue() != labels[i] {
					continue series
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		return 0
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
