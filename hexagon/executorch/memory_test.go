package executorch

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
)

// TestSharedMemory runs the golden short case with shared memory under
// hostsim's one-kind-per-allocation rule (each KV pool is viewed by both
// methods with their own shapes, every view registered, no fallback) and
// with hostsim refusing every registration (each tensor falls back to a
// client buffer with one warning naming it): the tokens are the golden ones
// both ways.
func TestSharedMemory(t *testing.T) {
	var short goldenCase
	for _, c := range loadGolden(t) {
		if c.Name == "short" {
			short = c
		}
	}
	path := writePTE(t, pteOpts{ctx: 512, ar: 32, shards: 1, kv: simfile.F32, logits: simfile.F32})
	set, _ := hostsimSet(t)
	for _, refuse := range []bool{false, true} {
		name := map[bool]string{false: "registered", true: "refused"}[refuse]
		t.Run(name, func(t *testing.T) {
			if refuse {
				set("HOSTSIM_FAIL_MEM_REGISTER", "8003")
				defer set("HOSTSIM_FAIL_MEM_REGISTER", "")
			}
			var logs bytes.Buffer
			lg := zerolog.New(&logs)
			rt := openRuntimeLogged(t, &lg)
			r := openRunner(t, rt, path)
			n := min(8, len(short.Greedy))
			got, _ := greedy(t, r, slices.Clone(short.PromptIDs), 0, n)
			if !slices.Equal(got, short.Greedy[:n]) {
				t.Errorf("tokens %v, want %v", got, short.Greedy[:n])
			}
			var warns []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "shared-memory registration failed") {
					warns = append(warns, l)
				}
			}
			switch {
			case !refuse && len(warns) > 0:
				t.Errorf("%d registrations fell back under hostsim's rules, first: %s", len(warns), warns[0])
			case refuse && len(warns) == 0:
				t.Error("no fallback warning with every registration refused")
			case refuse:
				for _, w := range warns {
					if !strings.Contains(w, `\"kv_forward\"`) && !strings.Contains(w, `\"prefill_forward\"`) || !strings.Contains(w, "8003") {
						t.Fatalf("warning %s names no method and tensor, or not the error", w)
					}
				}
			}
		})
	}
}
