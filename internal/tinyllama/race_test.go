//go:build race

package tinyllama

func init() { raceEnabled = true }
