//go:build !race

package costtest

const raceSlowdown = 1

// Race says whether the race detector is on.
const Race = false
