package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRun runs the demo as its README says, `make run`, three times on one
// workspace: it is made where DEMO says and printed, the next run replaces it,
// nothing is left in TMPDIR, and a Ctrl-C (SIGINT to make's process group, as
// a terminal sends it) while the plan waits at its gate stops the sidecar and
// the approval still to come.
func TestMakeRun(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin, demo, scratch := filepath.Join(tmp, "bin"), filepath.Join(tmp, "demo"), filepath.Join(tmp, "tmp")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	makeRun := func(approve string, out *bytes.Buffer) *exec.Cmd {
		cmd := exec.Command("make", "-s", "run", "BIN="+bin, "DEMO="+demo, "DEMO_APPROVE="+approve)
		cmd.Dir = root
		cmd.Env = append(withoutMake(os.Environ()), "TMPDIR="+scratch)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	for _, run := range []string{"first", "again"} {
		var out bytes.Buffer
		if err := makeRun("0", &out).Run(); err != nil {
			t.Fatalf("%s make run: %v\n%s", run, err, out.String())
		}
		if want := "demo workspace: " + demo + " "; !strings.Contains(out.String(), want) {
			t.Errorf("%s make run does not say %q:\n%s", run, want, out.String())
		}
		if got := planStatus(t, demo); got != "DONE" {
			t.Errorf("%s make run: the plan is %s, want DONE", run, got)
		}
		if _, err := os.Stat(filepath.Join(demo, "stale.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s make run kept a file of the workspace before it: %v", run, err)
		}
		leftIn(t, scratch)
		if err := os.WriteFile(filepath.Join(demo, "stale.txt"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var out bytes.Buffer
	cmd := makeRun("600", &out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer syscall.Kill(-pgid, syscall.SIGKILL) // what a failed test leaves, by its group
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stepseq := filepath.Join(bin, "stepseq")
	waitFor(t, "the sidecar to hold the demo at its gate", func() bool {
		r, ok := status(stepseq, demo)
		return ok && r.Runner != nil && r.WaitingFor.Action == "gated"
	})
	if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("make run did not end after a Ctrl-C:\n%s", out.String())
	}
	waitFor(t, "the sidecar to stop", func() bool {
		r, ok := status(stepseq, demo)
		return ok && r.Runner == nil
	})
	if left := liveInGroup(t, pgid); len(left) > 0 {
		t.Errorf("after a Ctrl-C, make run left processes running: %s", strings.Join(left, ", "))
	}
	if got := planStatus(t, demo); got == "DONE" {
		t.Error("after a Ctrl-C at the gate, the plan went on to DONE")
	}
	if _, err := os.Stat(filepath.Join(demo, "approved.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after a Ctrl-C the approval still came: %v", err)
	}
	leftIn(t, scratch)
}

// withoutMake is env without an outer make's variables: the test may run
// under `make test`, whose jobserver is not this make's.
func withoutMake(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			out = append(out, kv)
		}
	}
	return out
}

type statusReport struct {
	Status     string             `json:"status"`
	Runner     *struct{ PID int } `json:"runner"`
	WaitingFor struct {
		Action string `json:"action"`
	} `json:"waitingFor"`
}

// status is `stepseq status --json` of the workspace; ok is false before it
// has a readable state.
func status(stepseq, dir string) (statusReport, bool) {
	var r statusReport
	out, _ := exec.Command(stepseq, "status", "--json", dir).Output()
	return r, json.Unmarshal(out, &r) == nil && r.Status != ""
}

func planStatus(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Status string }
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st.Status
}

// leftIn fails the test when dir is not empty.
func leftIn(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("make run left %s in TMPDIR", e.Name())
	}
}

// liveInGroup lists the processes of group pgid that are not zombies (a
// zombie has ended; what reaps it is not make's business).
func liveInGroup(t *testing.T, pgid int) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // it ended
		}
		s := string(data)
		end := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[end+1:]) // state, ppid, pgrp, …
		if len(f) < 3 || f[0] == "Z" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		out = append(out, s[:end+1])
	}
	return out
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
