package ollama

import (
	"encoding/json"
	"testing"
	"time"
)

// TestKeepAlive (issue #39 finding 6): the strings "NaN", "1e300" and
// "1e12" are a 400 as the same numbers are, not a duration that wraps.
func TestKeepAlive(t *testing.T) {
	tests := []struct {
		raw  string
		want time.Duration // -2: refused
	}{
		{`"5m"`, 5 * time.Minute},
		{`"-1s"`, -time.Second},
		{`"30"`, 30 * time.Second},
		{`30`, 30 * time.Second},
		{`-1`, -time.Second},
		{`"1.5"`, 1500 * time.Millisecond},
		{`"NaN"`, -2},
		{`"nan"`, -2},
		{`"1e300"`, -2},
		{`"-1e300"`, -2},
		{`"1e12"`, -2},
		{`"Inf"`, -2},
		{`1e300`, -2},
		{`1e12`, -2},
		{`"soon"`, -2},
	}
	for _, tc := range tests {
		d, err := keepAlive(json.RawMessage(tc.raw))
		switch {
		case tc.want == -2 && err == nil:
			t.Errorf("%s: accepted as %v", tc.raw, *d)
		case tc.want == -2:
			if e, ok := err.(interface{ Error() string }); !ok || e.Error() == "" {
				t.Errorf("%s: %v", tc.raw, err)
			}
		case err != nil || *d != tc.want:
			t.Errorf("%s: %v %v, want %v", tc.raw, d, err, tc.want)
		}
	}
}
