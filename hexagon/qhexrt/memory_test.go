package qhexrt

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
)

// TestSharedMemory runs the golden short case in both contracts with
// shared memory under hostsim's one-kind-per-allocation rule (the chunked
// contract binds each KV cache in the prefill and the decode graph; nothing
// may fall back), and with hostsim refusing every registration (every tensor
// falls back to a client buffer, with one warning naming it and the error):
// the greedy tokens are the golden ones both ways.
func TestSharedMemory(t *testing.T) {
	c := loadGolden(t).get(t, "short")
	for _, contract := range []simfile.Contract{simfile.QHexRT, simfile.Chunked} {
		for _, refuse := range []bool{false, true} {
			v := f32(contract, 16, simfile.MaskAdditive)
			t.Run(v.String()+map[bool]string{false: "/registered", true: "/refused"}[refuse], func(t *testing.T) {
				cfg := hostsimConfig(t)
				ctl := openHostsimCtl(t, cfg)
				if refuse {
					ctl.Set("HOSTSIM_FAIL_MEM_REGISTER", "8003")
					defer ctl.Set("HOSTSIM_FAIL_MEM_REGISTER", "")
				}
				var logs bytes.Buffer
				qlog := zerolog.New(&logs)
				cfg.Logger = &qlog
				r, err := Open(Config{Bundle: tinyBundle(t, v), QNN: cfg, Logger: zerolog.Nop()})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				mems := ctl.Stats().LiveMems
				steps := min(8, len(c.Greedy))
				if got := greedy(t, r, c, steps); !slices.Equal(got, c.Greedy[:steps]) {
					t.Errorf("greedy = %v, want %v", got, c.Greedy[:steps])
				}
				var warns []string
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, "shared-memory registration failed") {
						warns = append(warns, l)
					}
				}
				switch {
				case !refuse && (len(warns) > 0 || mems == 0):
					t.Errorf("%d live registrations, %d fell back under hostsim's rules: %q", mems, len(warns), warns)
				case refuse && (len(warns) == 0 || mems != 0):
					t.Errorf("%d live registrations, %d fallback warnings with every registration refused", mems, len(warns))
				case refuse:
					for _, w := range warns {
						if !strings.Contains(w, `graph \"`) || !strings.Contains(w, "8003") {
							t.Fatalf("warning %s names no graph and tensor, or not the error", w)
						}
					}
				}
			})
		}
	}
}
