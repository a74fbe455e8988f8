//go:build race

package planspec

const raceEnabled = true
