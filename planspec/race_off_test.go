//go:build !race

package planspec

const raceEnabled = false
