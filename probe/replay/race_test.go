//go:build race

package replay_test

const raceEnabled = true
