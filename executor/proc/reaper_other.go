//go:build !linux

package proc

import "time"

// Without a subreaper, a step's descendants that left its process group are
// not found: the group's sweep is all there is.

func becomeSubreaper() {}

func endReparented(group int, marks []string, grace time.Duration) {}
