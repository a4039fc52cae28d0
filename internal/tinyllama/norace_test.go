package tinyllama

// raceEnabled is set under -race, where the long golden case is too slow.
var raceEnabled bool
