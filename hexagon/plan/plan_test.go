package plan

import (
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	ms := time.Millisecond
	c := Costs{Prefill: 64 * ms, Decode: 60 * ms, LMHead: 2 * ms}
	q := &Planner{Window: 4, Costs: c}
	ch := &Planner{Chunked: true, Window: 4, Costs: c}
	lim := &Planner{Chunked: true, Window: 4, Limit: 6, Costs: Costs{Prefill: 1, Decode: 1}, DecodeMeasured: true}
	tests := []struct {
		name      string
		p         *Planner
		n, valid  int
		wantFrom  int
		wantSteps []Step
	}{
		{"qhexrt fresh short", q, 3, 0, 0, []Step{{true, 0, 3}}},
		{"qhexrt fresh one token", q, 1, 0, 0, []Step{{false, 0, 1}}},
		{"qhexrt fresh long", q, 6, 0, 0, []Step{{true, 0, 4}, {false, 4, 1}, {false, 5, 1}}},
		{"qhexrt reuse one", q, 4, 3, 3, []Step{{false, 3, 1}}},
		{"qhexrt reprefill", q, 4, 1, 0, []Step{{true, 0, 4}}},
		{"qhexrt fully cached", q, 4, 4, 3, []Step{{false, 3, 1}}},
		{"qhexrt long reuse", q, 8, 5, 5, []Step{{false, 5, 1}, {false, 6, 1}, {false, 7, 1}}},
		{"chunked reuse", ch, 10, 3, 3, []Step{{true, 3, 4}, {true, 7, 3}}},
		{"chunked tail decode", ch, 9, 3, 3, []Step{{true, 3, 4}, {true, 7, 2}}},
		{"chunked one", ch, 9, 8, 8, []Step{{false, 8, 1}}},
		// A limit cuts the windows; past it only decode steps.
		{"limit", lim, 9, 0, 0, []Step{{true, 0, 4}, {true, 4, 2}, {false, 6, 1}, {false, 7, 1}, {false, 8, 1}}},
		{"limit reached", lim, 9, 6, 6, []Step{{false, 6, 1}, {false, 7, 1}, {false, 8, 1}}},
		{"limit, one before", lim, 8, 5, 5, []Step{{false, 5, 1}, {false, 6, 1}, {false, 7, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := tt.p.From(tt.n, tt.valid)
			if from != tt.wantFrom {
				t.Fatalf("from = %d, want %d", from, tt.wantFrom)
			}
			var got []Step
			tt.p.Each(tt.n, from, func(s Step) { got = append(got, s) })
			if len(got) != len(tt.wantSteps) {
				t.Fatalf("steps %v, want %v", got, tt.wantSteps)
			}
			for i := range got {
				if got[i] != tt.wantSteps[i] {
					t.Fatalf("steps %v, want %v", got, tt.wantSteps)
				}
			}
		})
	}
}
