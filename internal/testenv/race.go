//go:build race

package testenv

// RaceEnabled says the binary was built with -race.
const RaceEnabled = true
