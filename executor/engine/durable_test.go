package engine

import (
	"errors"
	"testing"
	"time"
)

// TestSyncTogether_Overlap: the state's and the notifications' fsyncs are in
// flight at once, each waiting for the other to have begun, and both errors
// come back.
func TestSyncTogether_Overlap(t *testing.T) {
	aIn, bIn := make(chan struct{}), make(chan struct{})
	meet := func(mine, other chan struct{}, err error) func() error {
		return func() error {
			close(mine)
			select {
			case <-other:
				return err
			case <-time.After(10 * time.Second):
				return errors.New("the other fsync never began while this one ran")
			}
		}
	}
	errState, errNotes := errors.New("state"), errors.New("notes")
	a, b := syncTogether(meet(aIn, bIn, errState), meet(bIn, aIn, errNotes))
	if a != errState || b != errNotes {
		t.Fatalf("got %v, %v; want the state's and the notes' own errors", a, b)
	}
}
