package notify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// TestNotifier_KeepUnlisted: a check or step opens the outbox with its own plan's
// sinks only. With KeepUnlisted the other runs' sinks keep their place and what
// they had yet to deliver, which a later notifier that lists them delivers, and
// the check's flush does not wait on them; without it their cursors go with
// their backlog.
func TestNotifier_KeepUnlisted(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			dir := t.TempDir()
			var down atomic.Bool
			down.Store(true)
			own := &fakeSink{}
			other := &fakeSink{fail: func(Notice) error {
				if down.Load() {
					return errors.New("down")
				}
				return nil
			}}
			open := func(keep bool, sinks ...SinkConfig) *Notifier {
				t.Helper()
				n, err := New(Config{Dir: dir, Sinks: sinks, KeepUnlisted: keep, Retry: quickRetry, Logger: testLogger(t)})
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			n := open(false, own.config("own"), other.config("other"))
			before := emitN(t, n, 3, "a")
			eventually(t, "the own sink's three reports", func() bool { return len(own.ids()) == 3 })
			closeNotifier(t, n)

			n = open(keep, own.config("own"))
			during := emitN(t, n, 1, "b")
			ctx, cancel := context.WithTimeout(context.Background(), effectWait)
			err := n.Flush(ctx)
			cancel()
			if err != nil {
				t.Fatalf("the check's flush: %v", err)
			}
			closeNotifier(t, n)

			down.Store(false)
			n = open(false, own.config("own"), other.config("other"))
			defer closeNotifier(t, n)
			after := emitN(t, n, 1, "c")
			want := after
			if keep {
				want = slices.Concat(before, during, after)
			}
			eventually(t, "the other sink's reports", func() bool { return slices.Contains(other.ids(), after[0]) })
			if got := firstSeen(other.ids()); !slices.Equal(got, want) {
				t.Errorf("the other sink delivered %v, want %v", got, want)
			}
		})
	}
}

// TestNew_AllowPlanCommand: a plan's notify command that --allow-agent does not
// permit is left out of a notifier's sinks (a check's, whose sinks are all its
// plan's); the command line's own sinks are the user's and stay.
func TestNew_AllowPlanCommand(t *testing.T) {
	sinks := PlanSinks([]planspec.NotifySink{{Command: []string{"evil"}}, {Command: []string{"listed"}}, {Webhook: "https://ntfy.sh/x"}})
	sinks = append(sinks, SinkConfig{Command: []string{"flagged"}})
	n, err := New(Config{Dir: t.TempDir(), Sinks: sinks, Logger: testLogger(t),
		AllowPlanCommand: func(argv []string) bool { return argv[0] == "listed" }})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	var names []string
	for _, s := range n.sinks {
		names = append(names, s.name)
	}
	if want := []string{"file", "command listed", "webhook https://ntfy.sh", "command flagged"}; !slices.Equal(names, want) {
		t.Errorf("sinks %q, want %q", names, want)
	}
}
