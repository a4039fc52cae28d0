package genie

import "testing"

// TestGraphPart: AI Hub's graph names give their part; any other name is refused.
func TestGraphPart(t *testing.T) {
	for _, tt := range []struct {
		name string
		k, n int
		ok   bool
	}{
		{"prompt_ar128_cl4096_1_of_3", 1, 3, true},
		{"token_ar1_cl4096_3_of_3", 3, 3, true},
		{"prompt_ar128_cl4096_1_of_3_extra", 0, 0, false},
		{"decode_ar1_cl4096_1_of_3", 0, 0, false},
		{"token_ar1_cl4096_99999999999999999999_of_3", 0, 3, false},
		{"", 0, 0, false},
	} {
		k, n, ok := GraphPart(tt.name)
		if ok != tt.ok || ok && (k != tt.k || n != tt.n) {
			t.Errorf("GraphPart(%q) = %d, %d, %v; want %d, %d, %v", tt.name, k, n, ok, tt.k, tt.n, tt.ok)
		}
	}
}
