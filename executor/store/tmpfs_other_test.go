//go:build !linux

package store

import (
	"errors"
	"testing"
)

// mountTmpfs fails: the tests mount a tmpfs of their own on Linux only.
func mountTmpfs(*testing.T, string, string) error {
	return errors.New("the tests mount a tmpfs of their own on Linux only")
}
