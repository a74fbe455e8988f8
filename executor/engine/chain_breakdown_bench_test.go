package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// BenchmarkChainBreakdown: where a step of the 100-step chain of `true` under
// check goes, beside its floor measured in the same run. The floor is taken
// apart (the spawn, the state's write, its fsync, the rename, the folder's
// fsync); the chain is run whole as BenchmarkChain runs it; then each piece of
// the chain's own work is timed alone, on the same file system and at the same
// sizes, and counted as often as the chain does it a step (the journal's and
// the outbox's records are counted in the files the chain left). What remains
// is the chain's time less the pieces: scheduling, waits, the sinks'
// goroutines, and whatever overlaps (the folder's and the outbox's fsyncs run
// while the agent does). The table is printed once; the figures are µs a step.
func BenchmarkChainBreakdown(b *testing.B) {
	const steps = 100
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal("no true on PATH")
	}
	var floor floorParts
	var parts chainParts
	var chain time.Duration
	for b.Loop() {
		floor.add(measureFloor(b, truePath, steps))
		d, counts := runCheckChain(b, truePath, steps)
		chain += d
		parts.add(measureParts(b, truePath, steps, counts))
	}
	n := float64(b.N) * steps
	printBreakdown(floor, parts, chain, n)
	b.ReportMetric(us(floor.total(), n), "floor-µs/step")
	b.ReportMetric(us(chain, n), "chain-µs/step")
	b.ReportMetric(float64(chain)/float64(floor.total()), "chain/floor")
}

// floorParts is the floor taken apart: per step a spawn of `true` and one
// durable replace of the chain's mean state.
type floorParts struct{ spawn, write, fsync, rename, dirSync time.Duration }

func (f *floorParts) add(o floorParts) {
	f.spawn += o.spawn
	f.write += o.write
	f.fsync += o.fsync
	f.rename += o.rename
	f.dirSync += o.dirSync
}

func (f floorParts) total() time.Duration {
	return f.spawn + f.write + f.fsync + f.rename + f.dirSync
}

func measureFloor(b *testing.B, truePath string, steps int) floorParts {
	dir := b.TempDir()
	path := filepath.Join(dir, "state.json")
	half := halfDone(steps, false)
	var p floorParts
	for i := range steps {
		t0 := time.Now()
		if err := exec.Command(truePath, chainPrompt(i)).Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		f, err := os.CreateTemp(dir, ".state.json")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(half); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		f.Close()
		if err := os.Rename(f.Name(), path); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		if err := syncFolder(dir); err != nil {
			b.Fatal(err)
		}
		t5 := time.Now()
		p.spawn += t1.Sub(t0)
		p.write += t2.Sub(t1)
		p.fsync += t3.Sub(t2)
		p.rename += t4.Sub(t3)
		p.dirSync += t5.Sub(t4)
	}
	return p
}

func syncFolder(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// chainCounts is how often the chain did what a step: journal records and
// notices, as its files tell.
type chainCounts struct{ journal, notices float64 }

// runCheckChain runs the chain as BenchmarkChain does and counts its records.
func runCheckChain(b *testing.B, truePath string, steps int) (time.Duration, chainCounts) {
	dir := b.TempDir()
	statePath := filepath.Join(dir, "state.json")
	if err := os.WriteFile(statePath, chainState(steps, false).Marshal(), 0o644); err != nil {
		b.Fatal(err)
	}
	rt, err := NewRuntime(statePath, nil)
	if err != nil {
		b.Fatal(err)
	}
	rt.Getenv = func(k string) string {
		if k == "STEP_AGENT_CMD" {
			return truePath
		}
		return ""
	}
	start := time.Now()
	if err := driveCheck(rt); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	rt.Close()
	ws := rt.WS
	return d, chainCounts{
		journal: float64(countLines(b, ws.JournalPath())) / float64(steps),
		notices: float64(countLines(b, filepath.Join(ws.Dir, ".stepseq", "notifications.jsonl"))) / float64(steps),
	}
}

func countLines(b *testing.B, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Count(data, []byte("\n"))
}

// chainParts is the chain's own work, each piece timed alone over the same
// number of steps and scaled by how often the chain does it a step.
type chainParts struct {
	spawn, encode, stateWrite, dirSync     time.Duration
	journal, notices, outboxSync, tryLock  time.Duration
	lockRecord, reads, decision            time.Duration
	journalPerStep, noticesPerStep, rounds float64
}

func (c *chainParts) add(o chainParts) {
	c.spawn += o.spawn
	c.encode += o.encode
	c.stateWrite += o.stateWrite
	c.dirSync += o.dirSync
	c.journal += o.journal
	c.notices += o.notices
	c.outboxSync += o.outboxSync
	c.tryLock += o.tryLock
	c.lockRecord += o.lockRecord
	c.reads += o.reads
	c.decision += o.decision
	c.journalPerStep += o.journalPerStep
	c.noticesPerStep += o.noticesPerStep
	c.rounds++
}

func (c chainParts) total() time.Duration {
	return c.spawn + c.encode + c.stateWrite + c.dirSync + c.journal + c.notices + c.outboxSync +
		c.tryLock + c.lockRecord + c.reads + c.decision
}

func measureParts(b *testing.B, truePath string, steps int, counts chainCounts) chainParts {
	dir := b.TempDir()
	statePath := filepath.Join(dir, "state.json")
	st := chainState(steps, false)
	if err := os.WriteFile(statePath, st.Marshal(), 0o644); err != nil {
		b.Fatal(err)
	}
	rt, err := NewRuntime(statePath, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	p := chainParts{journalPerStep: counts.journal, noticesPerStep: counts.notices}
	p.decision = timeDecisions(b, rt, steps)
	p.spawn, p.tryLock, p.lockRecord = timeLaunches(b, rt, truePath, steps)
	p.encode, p.stateWrite, p.dirSync, p.reads = timeStateFile(b, rt, statePath, steps)
	p.journal = scale(timeJournal(b, rt, steps), counts.journal)
	notices, sync := timeOutbox(b, rt, steps)
	p.notices, p.outboxSync = scale(notices, counts.notices), sync
	return p
}

func scale(d time.Duration, times float64) time.Duration {
	return time.Duration(float64(d) * times)
}

// timeDecisions drives the chain's machine with its effects answered at once
// and nothing done: what the machine takes to decide, its probes included.
func timeDecisions(b *testing.B, rt *Runtime, steps int) time.Duration {
	sf := &store.StateFile{Path: rt.WS.State}
	st, err := sf.Read()
	if err != nil {
		b.Fatal(err)
	}
	rt.Getenv = func(k string) string {
		if k == "STEP_AGENT_CMD" {
			return "true"
		}
		return ""
	}
	d := newDriver(context.Background(), rt, sf, nil, core.MachineConfig{Driver: "check", MaxRetries: 3, StampHeartbeat: true})
	start := time.Now()
	queue := d.m.Handle(rt.now(), core.StateRead{State: st})
	for !d.m.Settled() && len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		switch e := e.(type) {
		case core.WriteState:
			queue = append(queue, d.m.Handle(rt.now(), core.Written{})...)
		case core.ReadState:
			queue = append(queue, d.m.Handle(rt.now(), core.StateRead{Unchanged: true})...)
		case core.StartAgent:
			now := rt.now()
			queue = append(queue, d.m.Handle(now, core.AgentExited{Step: e.Step, Try: e.Try, Exit: core.Exit{Started: now, Ended: now}})...)
		}
	}
	elapsed := time.Since(start)
	if d.m.State().Status != planspec.StatusDone {
		b.Fatalf("the machine alone did not finish the chain: %s", d.m.State().Status)
	}
	return elapsed
}

// timeLaunches starts `true` as the chain does (its process group, its log), timing apart the try lock's
// records (taken, the agent's pid, its end) and the workspace lock's.
func timeLaunches(b *testing.B, rt *Runtime, truePath string, steps int) (spawn, tryLock, lockRecord time.Duration) {
	lock, _, err := store.TryLock(rt.WS, "check")
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Unlock()
	never := func(proc.TryRecord) bool { return false }
	for i := range steps {
		id := fmt.Sprintf("step-%03d", i)
		t0 := time.Now()
		h, err := proc.TakeTryLock(rt.WS, proc.TryRecord{Step: id, Try: 1, Started: planspec.FormatISO(time.Now())}, never)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		run, err := proc.ProcessLauncher{}.Launch(proc.TrySpec{Step: id, Try: 1, LogPath: rt.WS.LogPath(id, 1), Proc: proc.Spec{
			Argv: []string{truePath, chainPrompt(i)}, Dir: rt.WS.Dir, Env: proc.AgentEnv(rt.Environ, id, 1, rt.WS, nil),
			Timeout: time.Hour, Grace: proc.DefaultGrace, Files: []*os.File{h.File}}})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		pid, ticks := run.Ident()
		h.Started(pid, ticks)
		lock.SetAgent(&store.AgentHandle{Step: id, Try: 1, PID: pid, StartTicks: ticks})
		t3 := time.Now()
		exit := <-run.Done()
		_ = run.Finish(exit)
		t4 := time.Now()
		h.Ended(exit, false)
		lock.SetAgent(nil)
		t5 := time.Now()
		spawn += t2.Sub(t1) + t4.Sub(t3)
		tryLock += t1.Sub(t0) + t5.Sub(t4) // with the lock record's clearing, small
		lockRecord += t3.Sub(t2)
	}
	return spawn, tryLock, lockRecord
}

// timeStateFile writes the chain's states as it does (one a step, each a step
// further on), timing apart the encoding, the replace and the folder's fsync,
// and the reads a step makes: an echo of its own write, the step's reports
// folder.
func timeStateFile(b *testing.B, rt *Runtime, statePath string, steps int) (encode, write, dirSync, reads time.Duration) {
	sf := &store.StateFile{Path: statePath}
	st, err := sf.Read()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for _, id := range st.StepQueue {
		core.BeginTry(st, id, now, false)
		t0 := time.Now()
		_ = st.MarshalPieces()
		t1 := time.Now()
		if err := sf.WriteVisible(st); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := sf.Sync(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if _, changed, err := sf.ReadIfChanged(); err != nil || changed {
			b.Fatalf("read of its own write: changed %v, %v", changed, err)
		}
		_, _ = os.ReadDir(filepath.Join(rt.WS.Dir, ".stepseq", "reports", id))
		t4 := time.Now()
		core.Record(st, id, core.Exit{}, core.Verdict{OK: true}, now)
		st.CurrentStep++
		encode += t1.Sub(t0)
		write += t2.Sub(t1) - t1.Sub(t0) // the encoding again, inside WriteVisible
		dirSync += t3.Sub(t2)
		reads += t4.Sub(t3)
	}
	return encode, max(write, 0), dirSync, reads
}

func timeJournal(b *testing.B, rt *Runtime, steps int) time.Duration {
	start := time.Now()
	for i := range steps {
		if err := rt.Journal.Record(core.Entry{Event: "verdict", Step: fmt.Sprintf("step-%03d", i), Try: 1,
			Detail: map[string]any{"ok": true, "seconds": 0.001}}); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// timeOutbox emits a notice a time and syncs once a step, as the chain does,
// with the feed's sink delivering beside it.
func timeOutbox(b *testing.B, rt *Runtime, steps int) (emit, sync time.Duration) {
	n, err := notify.New(notify.Config{Dir: rt.WS.Dir, KeepUnlisted: true, Logger: rt.Logger})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	}()
	for i := range steps {
		t0 := time.Now()
		n.Notify(core.Notification{Step: fmt.Sprintf("step-%03d", i), Try: 1, Status: "done", Output: "exit 0"})
		t1 := time.Now()
		if err := n.Sync(); err != nil {
			b.Fatal(err)
		}
		emit += t1.Sub(t0)
		sync += time.Since(t1)
	}
	return emit, sync
}

func us(d time.Duration, n float64) float64 { return float64(d.Nanoseconds()) / 1e3 / n }

func printBreakdown(f floorParts, c chainParts, chain time.Duration, n float64) {
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(what string, d time.Duration, note string) {
		fmt.Fprintf(w, "%s\t%.0f\t %s\n", what, us(d, n), note)
	}
	fmt.Fprintf(w, "100-step chain under check, µs a step\t\t\n")
	row("floor: spawn of true", f.spawn, "")
	row("floor: state write", f.write, "")
	row("floor: state fsync", f.fsync, "")
	row("floor: rename", f.rename, "")
	row("floor: folder fsync", f.dirSync, "")
	row("floor", f.total(), "")
	row("chain: spawn of true (and its wait)", c.spawn, "")
	row("chain: state encode", c.encode, "")
	row("chain: state write, fsync, rename", c.stateWrite, "")
	row("chain: folder fsync", c.dirSync, "overlaps the agent")
	row("chain: journal records", c.journal, fmt.Sprintf("%.1f a step", c.journalPerStep/c.rounds))
	row("chain: outbox records", c.notices, fmt.Sprintf("%.1f a step", c.noticesPerStep/c.rounds))
	row("chain: outbox fsync", c.outboxSync, "overlaps the agent")
	row("chain: try lock and its records", c.tryLock, "")
	row("chain: workspace lock's agent record", c.lockRecord, "")
	row("chain: reads (own write's echo, reports)", c.reads, "")
	row("chain: decision (the machine)", c.decision, "")
	row("chain: what remains", chain-c.total(), "")
	row("chain", chain, fmt.Sprintf("%.2f× the floor", float64(chain)/float64(f.total())))
	row("chain's pieces timed alone", c.total(), "")
	w.Flush()
	// Printed, not logged: a benchmark's log is cut to its first lines.
	fmt.Print(out.String())
}
