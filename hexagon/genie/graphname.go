package genie

import (
	"regexp"
	"strconv"
)

var graphName = regexp.MustCompile(`^(prompt|token)_ar(\d+)_cl(\d+)_(\d+)_of_(\d+)$`)

// GraphPart reads a graph name of AI Hub's form, {prompt|token}_ar{A}_cl{C}_{k}_of_{N}: the graph
// is in part k of N. ok is false for a name of another form.
func GraphPart(name string) (k, n int, ok bool) {
	m := graphName.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, false
	}
	k, errK := strconv.Atoi(m[4])
	n, errN := strconv.Atoi(m[5])
	return k, n, errK == nil && errN == nil
}
