//go:build chaos

package executor

import (
	"bufio"
	"bytes"
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

	"github.com/stepseq/stepseq/planspec"
)

// The chaos test (`make chaos`, not part of `make test`): the built stepseq watch
// is killed with SIGKILL at random moments over long plans and started again at
// once, while a reader polls state.json all the while. Everything that must never
// happen is counted, and must stay 0:
//
//   - torn reads: a state.json that does not parse;
//   - steps run again after they finished: an agent started for a step after the
//     reader saw the step DONE on disk, or a step seen DONE that later is not;
//   - tries counted for interruptions: a step whose agent always succeeds that
//     ends with more than one try;
//   - lock refusals: a new sidecar that exits calling the workspace locked by
//     the one just killed.
//
// STEPSEQ_CHAOS_KILLS sets how many kills (default 400), STEPSEQ_CHAOS_STEPS the
// steps of each plan (default 300); rounds of fresh plans run until the kills
// are done.

func chaosEnv(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

type chaosFigures struct {
	kills, rounds, steps, reads    int
	torn, rerunAfterDone, regress  int
	extraTries, lockRefusals       int
	interruptions, inheritedReruns int
}

func TestChaos(t *testing.T) {
	kills, steps := chaosEnv("STEPSEQ_CHAOS_KILLS", 400), chaosEnv("STEPSEQ_CHAOS_STEPS", 300)
	bin := filepath.Join(t.TempDir(), "stepseq")
	build := exec.Command("go", "build", "-o", bin, "github.com/stepseq/stepseq")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal("build stepseq:", err)
	}
	var f chaosFigures
	began := time.Now()
	for f.kills < kills {
		chaosRound(t, bin, steps, kills-f.kills, &f)
		if t.Failed() {
			break
		}
	}
	t.Logf("chaos: %d kill -9 over %d rounds of %d steps (%d steps run) in %s; %d reads of state.json",
		f.kills, f.rounds, steps, f.steps, time.Since(began).Round(time.Second), f.reads)
	t.Logf("chaos: torn reads %d, steps run again after DONE %d, DONE steps gone back %d, tries counted for interruptions %d, lock refusals %d",
		f.torn, f.rerunAfterDone, f.regress, f.extraTries, f.lockRefusals)
	t.Logf("chaos: interruptions recorded %d; steps started again because the sidecar died before recording the verdict of an agent that had ended %d",
		f.interruptions, f.inheritedReruns)
	if f.torn+f.rerunAfterDone+f.regress+f.extraTries+f.lockRefusals != 0 {
		t.Error("chaos: a count that must be 0 is not")
	}
}

// chaosRound runs one plan of n steps to DONE under at most budget kills.
func chaosRound(t *testing.T, bin string, n, budget int, f *chaosFigures) {
	f.rounds++
	dir, out := t.TempDir(), t.TempDir()
	state := filepath.Join(dir, "state.json")
	startsLog, endsLog := filepath.Join(out, "starts"), filepath.Join(out, "ends")
	instrs := make([]string, n)
	for i := range instrs {
		instrs[i] = fmt.Sprintf(`"instruction":"count:%s sleep:%dms write:out/s%d count:%s","requiredOutputs":["out/s%d"]`,
			startsLog, 5+rand.IntN(30), i+1, endsLog, i+1)
	}
	if err := os.WriteFile(state, []byte(plan("", instrs...)), 0o644); err != nil {
		t.Fatal(err)
	}

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
		cmd := exec.Command(bin, "watch", "--exit-when-done", "--grace", "300ms", dir)
		cmd.Env = append(os.Environ(), "STEP_AGENT_CMD="+fakeAgentPath)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return cmd, exited
	}
	deadline := time.Now().Add(10 * time.Minute)
	cmd, exited := start()
	for killed := 0; ; {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("round %d not DONE within 10 minutes; see %s", f.rounds, logf.Name())
			break
		}
		var wait time.Duration
		if killed < budget {
			wait = time.Duration(20+rand.IntN(180)) * time.Millisecond
		} else {
			wait = time.Hour
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
		case <-time.After(wait): // the chaos itself: a kill at a random moment
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			killed++
			f.kills++
			cmd, exited = start()
			continue
		}
		break
	}
	close(stopReader)
	wg.Wait()

	st, err := (&StateFile{Path: state}).Read()
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
	starts, ends := agentStamps(t, startsLog), agentStamps(t, endsLog)
	for id, times := range starts {
		for _, at := range times {
			if seen, ok := doneSeen[id]; ok && at > seen {
				f.rerunAfterDone++
				t.Logf("step %s started at %d, after it was seen DONE at %d", id, at, seen)
			}
			if e := ends[id]; len(e) > 0 && at > e[0] {
				f.inheritedReruns++
			}
		}
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
