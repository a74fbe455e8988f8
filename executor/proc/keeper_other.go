//go:build !linux

package proc

import (
	"os"
	"syscall"
	"time"
)

// Without a keeper (it needs Linux's child subreaper and /proc), agents are
// launched by stepseq itself, and what a try started is found after a crash by
// its process group alone.

// keeperEnv would mark a process started as a keeper.
const keeperEnv = "STEPSEQ_KEEPER"

// KeeperMain reports false: this process launches its agents itself.
func KeeperMain() (int, bool) { return 0, false }

type keeperClient struct{}

type keptAgent struct {
	pid   int
	ticks uint64
}

const (
	noteStopped  = 1
	noteTimedOut = 2
)

func theKeeper() (*keeperClient, error) { return nil, nil }

func (*keeperClient) launch(string, []string, []string, string, *syscall.SysProcAttr, int, []*os.File) (*keptAgent, error) {
	return nil, syscall.ENOSYS
}

type keeperAnswer struct {
	status syscall.WaitStatus
	left   bool
}

func (*keptAgent) ends() (<-chan keeperAnswer, <-chan struct{}) { return nil, nil }
func (*keptAgent) note(uint64)                                  {}
func (*keptAgent) judged()                                      {}
func (*keptAgent) end() (syscall.WaitStatus, bool, error)       { return 0, false, syscall.ENOSYS }
func endKept(*keptAgent, []string, time.Duration)               {}
