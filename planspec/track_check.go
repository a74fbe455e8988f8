//go:build !race

package planspec

const checkTracking = false
