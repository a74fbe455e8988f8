//go:build !linux

package testfs

import (
	"errors"
	"testing"
)

// MountTmpfs fails: the tests mount a tmpfs of their own on Linux only.
func MountTmpfs(*testing.T, string, string) error {
	return errors.New("the tests mount a tmpfs of their own on Linux only")
}
