package inference

// SetSampleHelpers makes engines created until restore start n sampling
// helpers, whatever GOMAXPROCS is.
func SetSampleHelpers(n int) (restore func()) {
	old := sampleHelpers
	sampleHelpers = func(int) int { return n }
	return func() { sampleHelpers = old }
}
