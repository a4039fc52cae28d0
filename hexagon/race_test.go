//go:build race

package hexagon

func init() { raceEnabled = true }
