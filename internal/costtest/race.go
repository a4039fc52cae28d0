//go:build race

package costtest

// raceSlowdown scales CPU bounds: the race detector makes code 5–10× slower.
const raceSlowdown = 10

// Race says whether the race detector is on.
const Race = true
