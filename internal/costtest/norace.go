//go:build !race

package costtest

const raceSlowdown = 1
