//go:build race

package qhexrt

func init() { raceEnabled = true }
