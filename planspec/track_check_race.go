//go:build race

package planspec

// checkTracking: builds with the race detector (the test suite's) check every
// tracked encoding against a full one.
const checkTracking = true
