package engine

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stepseq/stepseq/executor/proc"
)

// An agent refused for want of descriptors (EMFILE) is started again once they
// are back: the launch says so once and the try's Exit is the agent's own.
func TestProcessLauncher_ShortageIsWaitedOut(t *testing.T) {
	w := newTestWS(t, "")
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	short := lim
	// No room for the agent's pipes, even should a descriptor still open
	// when /proc was read (its own among them) be closed meanwhile.
	short.Cur = uint64(len(fds)) - 2
	var told atomic.Int32
	restored := make(chan struct{})
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &short); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	run, err := proc.ProcessLauncher{}.Launch(proc.TrySpec{Step: "s1", Try: 1, LogPath: w.path("s1.log"),
		Proc: proc.Spec{Argv: []string{agentBinary(t), "write:" + w.path("out")}, Dir: w.dir},
		OnShortage: func(err error) {
			told.Add(1)
			if !errors.Is(err, syscall.EMFILE) {
				t.Errorf("shortage %v, want EMFILE", err)
			}
			go func() {
				_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
				close(restored)
			}()
		}})
	if err != nil {
		t.Fatalf("launch: %v, want it deferred", err)
	}
	exit := <-run.Done()
	<-restored
	if exit.Err != nil || exit.Code != 0 || told.Load() != 1 {
		t.Errorf("exit %+v, told %d times; want exit 0, told once", exit, told.Load())
	}
	if _, err := os.Stat(w.path("out")); err != nil {
		t.Errorf("the agent did not run: %v", err)
	}
}
