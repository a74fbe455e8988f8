//go:build !linux

package sandbox

import (
	"errors"
	"testing"
)

// TestCommand_Unsupported: where there is no sandbox, a sandboxed agent gets no
// command line, so that it cannot be run bare.
func TestCommand_Unsupported(t *testing.T) {
	if _, _, err := Command(Spec{Workspace: t.TempDir(), Argv: []string{"true"}}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
}
