package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// BenchmarkLimitReset measures, under the sidecar, how long after the reset a
// claude stated (its 1.x result, "Claude AI usage limit reached|<epoch>", 2-3 s
// ahead) the same try's agent starts again: from the stated time to the fake
// CLI's own start (reset-to-rerun-ms, the mean; max-reset-to-rerun-ms, the worst
// round). It must be within 1 s. Each round waits out its reset.
func BenchmarkLimitReset(b *testing.B) {
	var total, worst time.Duration
	for b.Loop() {
		dir := b.TempDir()
		bin := fakeBin(b, "claude")
		reset := time.Now().Truncate(time.Second).Add(3 * time.Second)
		fakeScripts(b, bin, "claude",
			fakeAnswer{Stdout: claudeJSON(true, fmt.Sprintf("Claude AI usage limit reached|%d", reset.Unix())), Exit: 1},
			fakeAnswer{Stdout: claudeJSON(false, "done")})
		state, _, stop := benchSidecar(b, dir, plan(`"stepseq":{"agent":"claude"}`, `"instruction":"do s1"`), ".")
		waitBench(b, func() bool {
			st, err := (&store.StateFile{Path: state}).Read()
			return err == nil && st.Status == planspec.StatusDone
		})
		stop()
		runs := fakeRuns(b, bin, "claude")
		if len(runs) != 2 {
			b.Fatalf("claude ran %d times", len(runs))
		}
		late := runs[1].Start.Sub(reset)
		if late < 0 {
			b.Fatalf("the try ran again %v before its reset", -late)
		}
		total += late
		worst = max(worst, late)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "reset-to-rerun-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-reset-to-rerun-ms")
}

// BenchmarkLimitWaitIdle counts the wakeups of a sidecar process (every thread's
// voluntary and involuntary context switches, /proc/PID/task/*/status) over 10 s
// of a usage-limit wait an hour long: the wait is one timer, so an idle wait
// should cost none. wakeups-to-start, those of the process's start up to the
// window, shows that the counter counts.
func BenchmarkLimitWaitIdle(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	until := planspec.FormatISO(time.Now().Add(time.Hour))
	since := planspec.FormatISO(time.Now())
	held := plan(`"stepseq":{"agent":"claude"}`, `"instruction":"do s1"`)
	held = strings.Replace(held, `"stepRuns":{}`, `"stepRuns":{"s1":{"status":"PENDING","tries":0,"lastRunIso":"`+since+`","phase":"waiting",`+
		`"stepseq":{"startedIso":"`+since+`","finishedIso":"`+since+`","limit":{"sinceIso":"`+since+`","untilIso":"`+until+`","stated":true,"waits":1,"agent":"claude","error":"claude: You've hit your 5-hour limit"}}}}`, 1)
	var most, start int64
	for b.Loop() {
		dir := b.TempDir()
		bin := fakeBin(b, "claude")
		if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(held), 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "STEPSEQ_TEST_SIDECAR="+filepath.Join(dir, "state.json"), "PATH="+bin)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		waitBench(b, func() bool {
			data, _ := os.ReadFile(filepath.Join(dir, ".stepseq", "journal.jsonl"))
			return strings.Contains(string(data), `"action":"waiting"`)
		})
		time.Sleep(time.Second) // the start's own work settles; not a synchronisation
		before := wakeups(cmd.Process.Pid)
		time.Sleep(10 * time.Second) // the measurement window, not a synchronisation
		after := wakeups(cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if runs := fakeRuns(b, bin, "claude"); len(runs) != 0 {
			b.Fatalf("the agent ran %d times during the wait", len(runs))
		}
		most, start = max(most, after-before), before
	}
	b.ReportMetric(float64(most), "max-wakeups-per-10s") // the worst round
	b.ReportMetric(float64(start), "wakeups-to-start")   // the counter counts: starting takes many
}

// wakeups counts the context switches of every thread of process pid.
func wakeups(pid int) int64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	var n int64
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}
