//go:build chaos

package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// The chaos tests (`make chaos`, not part of `make test`): the built stepseq is
// killed with SIGKILL at random moments over long plans and started again at once,
// while a reader polls state.json all the while. Each agent holds a non-blocking
// flock on a per-step file while it runs (twin:), so that a second agent of the
// same step alive at once finds it taken and says so. Everything that must never
// happen is counted, and must stay 0:
//
//   - overlaps: two agents of one step alive at once;
//   - torn reads: a state.json that does not parse;
//   - steps run again after they finished: an agent started for a step after the
//     reader saw the step DONE on disk, or a step seen DONE that later is not;
//   - orphans run again: an agent started for a step after an agent of that
//     step had written its output and ended (its output said done);
//   - tries counted for interruptions: a step whose agent always succeeds that
//     ends with more than one try;
//   - lock refusals: a new sidecar that exits calling the workspace locked by
//     the one just killed.
//
// TestChaos kills `stepseq watch` three ways: at a random moment, twice in a row
// (the second within 40 ms of the restart), and 0-3 ms after a state write that
// records a try (the launch window). STEPSEQ_CHAOS_KILLS sets how many kills
// (default 400), STEPSEQ_CHAOS_STEPS the steps of each plan (default 300).
// TestChaosCheck drives the plan by `stepseq check` heartbeats, some killed mid-step
// and some left running under the next (STEPSEQ_CHAOS_CHECK_KILLS, default 100).
// TestChaosIntake kills the sidecar 0-40 ms after each plan is dropped
// (STEPSEQ_CHAOS_INTAKE_KILLS plans, default 200): no plan is applied or run twice
// and no temporary file is left. TestChaosOrphanGrandchild runs TestChaos's
// rounds with a wrapper agent whose worker does not hold the try lock (Python's
// subprocess.Popen closes it), in the agent's group and in a session of its
// own, round after round: after each kill of the sidecar the wrapper, the
// agent's main process, is killed too, leaving the worker at its work
// (STEPSEQ_CHAOS_GRANDCHILD_KILLS, default 100; STEPSEQ_CHAOS_GRANDCHILD_STEPS,
// default 60). STEPSEQ_CHAOS_KEEP, a folder, keeps a copy of
// each round of TestChaos and TestChaosCheck that counted what must not happen.

func chaosEnv(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

type chaosFigures struct {
	kills, doubles, launchWindow, rounds, steps, reads int
	agentKills                                         int // agents' main processes killed after the sidecar
	torn, rerunAfterDone, regress, overlaps            int
	extraTries, lockRefusals, finishedRerun            int
	interruptions, orphansJudged                       int
	windowLate                                         time.Duration // the latest launch-window kill after its write's event
}

func (f *chaosFigures) report(t *testing.T) {
	t.Logf("chaos: overlaps %d, torn reads %d, steps run again after DONE %d, DONE steps gone back %d, orphans that finished run again %d, tries counted for interruptions %d, lock refusals %d",
		f.overlaps, f.torn, f.rerunAfterDone, f.regress, f.finishedRerun, f.extraTries, f.lockRefusals)
	t.Logf("chaos: interruptions recorded %d; orphans judged done by what they left %d", f.interruptions, f.orphansJudged)
	if f.bad() != 0 {
		t.Error("chaos: a count that must be 0 is not")
	}
}

// bad is the sum of the counts that must be 0.
func (f *chaosFigures) bad() int {
	return f.overlaps + f.torn + f.rerunAfterDone + f.regress + f.finishedRerun + f.extraTries + f.lockRefusals
}

// chaosKeep copies a round's folders (its workspace, the agents' stamps and the
// stepseq log) under STEPSEQ_CHAOS_KEEP, when set, to be read after the test
// has removed its own.
func chaosKeep(t *testing.T, name string, dirs ...string) {
	keep := os.Getenv("STEPSEQ_CHAOS_KEEP")
	if keep == "" {
		return
	}
	for i, d := range dirs {
		to := filepath.Join(keep, name, strconv.Itoa(i))
		if err := os.CopyFS(to, os.DirFS(d)); err != nil {
			t.Logf("keep %s: %v", d, err)
			continue
		}
		t.Logf("kept %s in %s", d, to)
	}
}

// buildStepseq builds the command under test.
func buildStepseq(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "stepseq")
	build := exec.Command("go", "build", "-o", bin, "github.com/stepseq/stepseq")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal("build stepseq:", err)
	}
	return bin
}

func TestChaos(t *testing.T) {
	kills, steps := chaosEnv("STEPSEQ_CHAOS_KILLS", 400), chaosEnv("STEPSEQ_CHAOS_STEPS", 300)
	bin := buildStepseq(t)
	var f chaosFigures
	began := time.Now()
	for f.kills < kills {
		chaosRound(t, bin, steps, kills-f.kills, &f, chaosAgent{cmd: func(string) string { return fakeAgentPath }, sleep: 5})
		if t.Failed() {
			break
		}
	}
	t.Logf("chaos: %d kill -9 (%d double crashes, %d in the launch window: within 3.5 ms of the try's record, the latest %s after it) over %d rounds of %d steps (%d steps run) in %s; %d reads of state.json",
		f.kills, f.doubles, f.launchWindow, f.windowLate.Round(10*time.Microsecond), f.rounds, steps, f.steps, time.Since(began).Round(time.Second), f.reads)
	f.report(t)
}

// chaosPlan writes an n-step plan whose agents hold their twin lock under out,
// stamp their start and end, and make their one required output.
func chaosPlan(t *testing.T, state, out string, n int, sleep func() int) {
	instrs := make([]string, n)
	for i := range instrs {
		instrs[i] = fmt.Sprintf(`"instruction":"twin:%s count:%s sleep:%dms write:out/s%d count:%s","requiredOutputs":["out/s%d"]`,
			filepath.Join(out, "twins"), filepath.Join(out, "starts"), sleep(), i+1, filepath.Join(out, "ends"), i+1)
	}
	if err := os.WriteFile(state, []byte(plan("", instrs...)), 0o644); err != nil {
		t.Fatal(err)
	}
}

type tryEvent struct {
	at   time.Time
	path string
}

// tryRecords signals each write of a try lock's record under dir (the record is
// Written just after the state write that records the try, just before the
// agent's start), latest-wins.
func tryRecords(t *testing.T, dir string) <-chan tryEvent {
	agents := filepath.Join(dir, store.MetaDir, "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(agents); err != nil {
		t.Fatal(err)
	}
	ch := make(chan tryEvent, 1)
	go func() {
		for ev := range w.Events {
			if ev.Has(fsnotify.Write) || ev.Has(fsnotify.Create) {
				select {
				case <-ch:
				default:
				}
				ch <- tryEvent{at: time.Now(), path: ev.Name}
			}
		}
	}()
	t.Cleanup(func() { w.Close() })
	return ch
}

// chaosAgent is the agent of a round's steps: its command (STEP_AGENT_CMD, the
// prompt appended), the least a step's work sleeps (30 ms more at most), and
// what to kill after each kill of the sidecar (nil: nothing).
type chaosAgent struct {
	cmd       func(out string) string
	sleep     int
	afterKill func(dir, out string) bool
}

// chaosRound runs one plan of n steps to DONE under at most budget kills.
func chaosRound(t *testing.T, bin string, n, budget int, f *chaosFigures, agent chaosAgent) {
	f.rounds++
	bad := f.bad()
	dir, out := t.TempDir(), t.TempDir()
	state := filepath.Join(dir, "state.json")
	chaosPlan(t, state, out, n, func() int { return agent.sleep + rand.IntN(30) })
	records := tryRecords(t, dir)

	// The reader: every state.json it can read must parse, and a step once DONE
	// stays DONE; it notes when it first saw each step DONE.
	doneSeen := map[string]int64{}
	var reads, torn, regress atomic.Int64
	var tornSample atomic.Value
	stopReader := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopReader:
				return
			default:
			}
			data, err := os.ReadFile(state)
			seen := time.Now().UnixNano()
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("read state.json: %v", err)
				}
				continue
			}
			reads.Add(1)
			st, err := planspec.ParseState(bytes.NewReader(data), state)
			if err != nil {
				torn.Add(1)
				tornSample.Store(err.Error())
				continue
			}
			for _, id := range st.StepQueue {
				done := st.Run(id).Status == planspec.StatusDone
				if _, was := doneSeen[id]; was && !done {
					regress.Add(1)
				} else if done && !was {
					doneSeen[id] = seen
				}
			}
			time.Sleep(200 * time.Microsecond) // the reader polls; it synchronises nothing
		}
	}()

	logf, err := os.Create(filepath.Join(out, "sidecar.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	start := func() (*exec.Cmd, chan error) {
		return startChaosWatchWith(t, bin, agent.cmd(out), logf, "--exit-when-done", "--grace", "300ms", dir)
	}
	deadline := time.Now().Add(10 * time.Minute)
	cmd, exited := start()
	kill := func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		f.kills++
		if agent.afterKill != nil && agent.afterKill(dir, out) {
			f.agentKills++
		}
	}
	for killed := 0; ; {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("round %d not DONE within 10 minutes; see %s", f.rounds, logf.Name())
			break
		}
		wait, kind := time.Hour, 0
		if killed < budget {
			// A random kill, crashes in a row, the launch window: 1 in 4, 1 in 4, 1 in 2.
			wait, kind = time.Duration(20+rand.IntN(180))*time.Millisecond, []int{0, 2, 1, 1}[rand.IntN(4)]
		}
		var armed <-chan tryEvent
		if kind == 1 {
			wait = time.Minute
			select {
			case <-records:
			default:
			}
			armed = records
		}
		select {
		case err := <-exited:
			var ee *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &ee) && ee.ExitCode() == 2:
				f.lockRefusals++
				cmd, exited = start()
				continue
			default:
				t.Errorf("stepseq watch: %v; see %s", err, logf.Name())
			}
		case ev := <-armed:
			// The launch window: 0-3 ms after the try's record, which follows
			// the state write that records the try by well under a millisecond.
			// A record that says the agent ended is the reaping, not the launch.
			var rec proc.TryRecord
			data, _ := os.ReadFile(ev.path)
			launching := json.Unmarshal(bytes.TrimSpace(data), &rec) == nil && !rec.Exited
			time.Sleep(time.Until(ev.at.Add(time.Duration(rand.IntN(3000)) * time.Microsecond)))
			late := time.Since(ev.at)
			kill()
			killed++
			if launching && late <= 3500*time.Microsecond {
				f.launchWindow++
				f.windowLate = max(f.windowLate, late)
			}
			cmd, exited = start()
			continue
		case <-time.After(wait): // the chaos itself: a kill at a random moment
			kill()
			killed++
			cmd, exited = start()
			if kind == 2 && killed < budget {
				// Crashes in a row: the restarted sidecar dies too, at once or
				// while it takes the workspace over.
				time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
				kill()
				killed++
				f.doubles++
				cmd, exited = start()
			}
			continue
		}
		break
	}
	close(stopReader)
	wg.Wait()

	st, err := (&store.StateFile{Path: state}).Read()
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != planspec.StatusDone {
		t.Errorf("round %d ended %s", f.rounds, st.Status)
	}
	f.steps += len(st.StepQueue)
	f.reads += int(reads.Load())
	f.torn += int(torn.Load())
	f.regress += int(regress.Load())
	if s, ok := tornSample.Load().(string); ok {
		t.Logf("a torn read: %s", s)
	}
	chaosOutcome(t, st, dir, out, f)
	starts := agentStamps(t, filepath.Join(out, "starts"))
	for id, times := range starts {
		for _, at := range times {
			if seen, ok := doneSeen[id]; ok && at > seen {
				f.rerunAfterDone++
				t.Logf("step %s started at %d, after it was seen DONE at %d", id, at, seen)
			}
		}
	}
	if f.bad() != bad {
		chaosKeep(t, fmt.Sprintf("round-%d", f.rounds), dir, out)
	}
}

// chaosOutcome counts what a finished plan says: tries beyond the first, twins,
// orphans run again after they finished, and what the journal says of orphans.
func chaosOutcome(t *testing.T, st *planspec.State, dir, out string, f *chaosFigures) {
	for _, id := range st.StepQueue {
		r := st.Run(id)
		if r.Tries > 1 {
			f.extraTries++
			t.Logf("step %s: %d tries", id, r.Tries)
		}
		if r.Agent != nil {
			f.interruptions += r.Agent.Interruptions
		}
	}
	if data, err := os.ReadFile(filepath.Join(out, "twins", "overlaps")); err == nil {
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		f.overlaps += len(lines)
		t.Logf("two agents of one step alive at once: %q", lines)
	}
	starts, ends := agentStamps(t, filepath.Join(out, "starts")), agentStamps(t, filepath.Join(out, "ends"))
	for id, times := range starts {
		for _, at := range times {
			if e := ends[id]; len(e) > 0 && at > e[0] {
				f.finishedRerun++
				t.Logf("step %s started again at %d after an agent of it finished at %d", id, at, e[0])
			}
		}
	}
	for _, name := range []string{"journal.jsonl.1", "journal.jsonl"} {
		data, _ := os.ReadFile(filepath.Join(dir, ".stepseq", name))
		f.orphansJudged += strings.Count(string(data), `"event":"orphan"`) - strings.Count(string(data), `the step runs again`)
	}
}

// agentStamps reads a count: file: each step's stamps, in order.
func agentStamps(t *testing.T, path string) map[string][]int64 {
	out := map[string][]int64{}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			t.Fatalf("%s: line %q", path, sc.Text())
		}
		ns, _ := strconv.ParseInt(fields[3], 10, 64)
		out[fields[0]] = append(out[fields[0]], ns)
	}
	return out
}

// TestChaosCheck drives plans by `stepseq check` heartbeats, as the original's
// cron does: a heartbeat every 30-500 ms, most killed mid-chain, some left
// running while the next one comes.
func TestChaosCheck(t *testing.T) {
	kills, steps := chaosEnv("STEPSEQ_CHAOS_CHECK_KILLS", 100), chaosEnv("STEPSEQ_CHAOS_CHECK_STEPS", 40)
	bin := buildStepseq(t)
	var f chaosFigures
	began := time.Now()
	heartbeats := 0
	for f.kills < kills && !t.Failed() {
		f.rounds++
		dir, out := t.TempDir(), t.TempDir()
		state := filepath.Join(dir, "state.json")
		chaosPlan(t, state, out, steps, func() int { return 50 + rand.IntN(300) })
		logf, err := os.Create(filepath.Join(out, "check.log"))
		if err != nil {
			t.Fatal(err)
		}
		var running []chan error
		deadline := time.Now().Add(10 * time.Minute)
		for {
			st, err := (&store.StateFile{Path: state}).Read()
			if err != nil {
				t.Fatalf("heartbeat %d: %v", heartbeats, err)
			}
			if st.Status == planspec.StatusDone {
				f.steps += len(st.StepQueue)
				before := f
				chaosOutcome(t, st, dir, out, &f)
				if f.bad() != before.bad() {
					chaosKeep(t, fmt.Sprintf("check-round-%d", f.rounds), dir, out)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d not DONE within 10 minutes; see %s", f.rounds, logf.Name())
			}
			cmd := exec.Command(bin, "check", state)
			cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+fakeAgentPath)
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			heartbeats++
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("stepseq check: %v; see %s", err, logf.Name())
				}
			case <-time.After(time.Duration(30+rand.IntN(470)) * time.Millisecond):
				if f.kills < kills && rand.IntN(4) != 0 {
					_ = cmd.Process.Signal(syscall.SIGKILL)
					<-exited
					f.kills++
				} else {
					running = append(running, exited) // the next heartbeat comes while it runs
				}
			}
		}
		for _, exited := range running {
			if err := <-exited; err != nil {
				t.Errorf("stepseq check: %v", err)
			}
		}
		logf.Close()
	}
	t.Logf("chaos check: %d heartbeats, %d kill -9 over %d rounds of %d steps in %s", heartbeats, f.kills, f.rounds, steps, time.Since(began).Round(time.Second))
	f.report(t)
}

// TestChaosIntake drops plans one after another into a sidecar's plans folder
// and kills the sidecar 0-40 ms after each drop, while it takes the plan in. No
// plan is applied twice, none of its steps runs twice, and no temporary file of
// an atomic write is left.
func TestChaosIntake(t *testing.T) {
	n := chaosEnv("STEPSEQ_CHAOS_INTAKE_KILLS", 200)
	bin := buildStepseq(t)
	dir, out := t.TempDir(), t.TempDir()
	plans, state := filepath.Join(dir, "plans"), filepath.Join(dir, "state.json")
	if err := os.MkdirAll(plans, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(out, "sidecar.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	start := func() (*exec.Cmd, chan error) { return startChaosWatch(t, bin, logf, "--grace", "300ms", dir) }
	cmd, exited := start()
	kills := 0
	began := time.Now()
	for i := range n {
		name := fmt.Sprintf("p%03d", i)
		yaml := fmt.Sprintf("name: %s\nsteps:\n  - id: a\n    title: A\n    instruction: count:%s sleep:5ms write:done/%s\n    requiredOutputs: [done/%s]\n",
			name, filepath.Join(out, name+".starts"), name, name)
		tmp := filepath.Join(plans, "."+name+".yaml")
		if err := os.WriteFile(tmp, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(plans, name+".yaml")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		kills++
		cmd, exited = start()
		deadline := time.Now().Add(time.Minute)
		for {
			st, err := (&store.StateFile{Path: state}).Read()
			if err == nil && st.Settings.Source == "plans/"+name+".yaml" && st.Status == planspec.StatusDone {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("plan %s not DONE within a minute; see %s", name, logf.Name())
			}
			time.Sleep(2 * time.Millisecond) // polls the outcome; synchronises nothing
		}
	}
	// A last sidecar takes the workspace over (removing what a killed one left
	// midway) and stops gracefully.
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	journal := filepath.Join(dir, ".stepseq", "journal.jsonl")
	ready := strings.Count(readAll(journal), `"event":"ready"`)
	cmd, exited = start()
	for deadline := time.Now().Add(time.Minute); strings.Count(readAll(journal), `"event":"ready"`) == ready; {
		if time.Now().After(deadline) {
			t.Fatalf("the last sidecar not ready within a minute; see %s", logf.Name())
		}
		time.Sleep(5 * time.Millisecond) // polls the journal; synchronises nothing
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-exited

	applied, ranTwice := 0, 0
	text := readAll(journal+".1") + readAll(journal)
	for i := range n {
		name := fmt.Sprintf("p%03d", i)
		if c := strings.Count(text, `"file":"plans/`+name+`.yaml","hash"`); c > 1 {
			applied++
			t.Logf("plan %s applied %d times", name, c)
		}
		if c := strings.Count(readAll(filepath.Join(out, name+".starts")), "\n"); c != 1 {
			ranTwice++
			t.Logf("plan %s's step started %d times", name, c)
		}
	}
	var temps []string
	ws := store.Workspace{Dir: dir, State: state}
	for _, d := range []string{dir, plans, ws.PlansDir(), ws.HistoryDir()} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if n := e.Name(); strings.HasPrefix(n, ".") && strings.Trim(n[len(n)-1:], "0123456789") == "" {
				temps = append(temps, filepath.Join(d, n))
			}
		}
	}
	t.Logf("chaos intake: %d plans, %d kill -9 during intake, in %s; plans applied twice %d, plans run twice %d, temporary files left %d %q",
		n, kills, time.Since(began).Round(time.Second), applied, ranTwice, len(temps), temps)
	if applied+ranTwice+len(temps) != 0 {
		t.Error("chaos intake: a count that must be 0 is not")
	}
}

func readAll(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// startChaosWatch starts `stepseq watch ARGS…` with the fake agent, its output
// into logf; the channel gets its Wait.
func startChaosWatch(t *testing.T, bin string, logf *os.File, args ...string) (*exec.Cmd, chan error) {
	t.Helper()
	return startChaosWatchWith(t, bin, fakeAgentPath, logf, args...)
}

// startChaosWatchWith is startChaosWatch with agent as STEP_AGENT_CMD.
func startChaosWatchWith(t *testing.T, bin, agent string, logf *os.File, args ...string) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"watch"}, args...)...)
	cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+agent)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited
}
