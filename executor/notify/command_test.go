package notify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/metrics"
	"github.com/stepseq/stepseq/planspec"
)

func TestCommand_StdinAndEnvironment(t *testing.T) {
	ws := t.TempDir()
	out := filepath.Join(t.TempDir(), "records.jsonl")
	n, err := New(Config{Dir: ws, Sinks: []SinkConfig{{Command: helperArgv("record", out)}}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	sent, err := n.Emit(Notice{Plan: "release", Step: "test", Try: 2, Who: "claude", Status: "blocked",
		Output: "flaky: 'quoted' $HOME `x` \x00 nul", Next: "a human looks at it"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the command's record", func() bool { return len(readRecords(t, out)) == 1 })
	rec := readRecords(t, out)[0]
	var got Notice
	if err := json.Unmarshal([]byte(rec.Stdin), &got); err != nil {
		t.Fatalf("stdin %q: %v", rec.Stdin, err)
	}
	if !reflect.DeepEqual(got, sent) {
		t.Errorf("stdin report %+v, want %+v", got, sent)
	}
	want := map[string]string{
		"STEPSEQ_NOTIFY_ID": sent.ID, "STEPSEQ_NOTIFY_PLAN": "release", "STEPSEQ_NOTIFY_STEP": "test",
		"STEPSEQ_NOTIFY_TRY": "2", "STEPSEQ_NOTIFY_WHO": "claude", "STEPSEQ_NOTIFY_STATUS": "blocked",
		"STEPSEQ_NOTIFY_OUTPUT": "flaky: 'quoted' $HOME `x`  nul", "STEPSEQ_NOTIFY_NEXT": "a human looks at it",
		"STEPSEQ_NOTIFY_TIME": sent.Time.UTC().Format(time.RFC3339Nano),
	}
	for k, v := range want {
		if rec.Env[k] != v {
			t.Errorf("%s = %q, want %q", k, rec.Env[k], v)
		}
	}
	if wsReal, _ := filepath.EvalSymlinks(ws); rec.Dir != wsReal && rec.Dir != ws {
		t.Errorf("ran in %s, want the workspace %s", rec.Dir, ws)
	}
}

func TestCommand_FailureRetried(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "records.jsonl")
	reg := metrics.NewRegistry()
	n, err := New(Config{Dir: t.TempDir(), Sinks: []SinkConfig{{Command: helperArgv("failfirst", filepath.Join(dir, "mark"), out)}},
		Retry: quickRetry, Logger: testLogger(t), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	ids := emitN(t, n, 3, "s")
	eventually(t, "three records", func() bool { return len(readRecords(t, out)) == 3 })
	var got []string
	for _, r := range readRecords(t, out) {
		got = append(got, r.Env["STEPSEQ_NOTIFY_ID"])
	}
	if !slices.Equal(got, ids) {
		t.Errorf("delivered %v, want %v", got, ids)
	}
	if f := counter(t, reg, "stepseq_notify_failed_total", KindCommand); f != 1 {
		t.Errorf("failed = %v, want 1", f)
	}
}

// readPids reads the "leader child" pids the hang mode writes; nil until then.
func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, _ := strconv.Atoi(f)
		pids = append(pids, p)
	}
	return pids
}

// alive reports whether pid runs (a zombie does not count: it has ended).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X'
}

// A command that hangs holds only its own sink: Emit returns, the webhook and
// the feed get every report meanwhile. Close stops the hung group.
func TestCommand_HangsWithoutDelayingOthers(t *testing.T) {
	ws := t.TempDir()
	pids := filepath.Join(t.TempDir(), "pids")
	h := newHook(t)
	n, err := New(Config{Dir: ws, Logger: testLogger(t), Timeout: time.Hour, Grace: 50 * time.Millisecond,
		Sinks: []SinkConfig{{Command: helperArgv("hang", pids)}, {Webhook: h.srv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := emitN(t, n, 3, "s")
	eventually(t, "the hung command's pids", func() bool { return len(readPids(pids)) == 2 })
	eventually(t, "the webhook's reports", func() bool { return len(h.received()) == 3 })
	eventually(t, "the feed's reports", func() bool { r, _ := Recent(ws, 10); return len(r) == 3 })
	if got := h.received(); !slices.Equal(got, ids) {
		t.Errorf("webhook got %v, want %v", got, ids)
	}
	p := readPids(pids)
	for _, pid := range p {
		if !alive(pid) {
			t.Fatalf("pid %d of the hung command is gone before the test ends it", pid)
		}
	}
	closeNotifier(t, n)
	// Close has sent SIGKILL to the group; the kernel ends its members shortly.
	eventually(t, "the hung group ended", func() bool { return !alive(p[0]) && !alive(p[1]) })
}

// After the timeout the command's whole group gets SIGTERM, then SIGKILL: the
// leader and its child ignore SIGTERM and must still go. (The command is retried
// meanwhile, each try stopped in its turn; a slow machine may stop a try before it
// writes its pids, and a later try writes them.)
func TestCommand_TimeoutStopsGroup(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	reg := metrics.NewRegistry()
	n, err := New(Config{Dir: t.TempDir(), Logger: testLogger(t), Registerer: reg,
		Timeout: time.Second, Grace: 50 * time.Millisecond, Retry: quickRetry,
		Sinks: []SinkConfig{{Command: helperArgv("hang", pids)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	emitN(t, n, 1, "s")
	eventually(t, "the hung command's pids", func() bool { return len(readPids(pids)) == 2 })
	p := readPids(pids)
	eventually(t, "the group stopped", func() bool { return !alive(p[0]) && !alive(p[1]) })
	eventually(t, "the failure counted", func() bool { return counter(t, reg, "stepseq_notify_failed_total", KindCommand) >= 1 })
}

// TestCommand_NoListenerToken: a notify command, the plan's or the command
// line's, runs without STEPSEQ_TOKEN, as an agent does: holding it, the command
// could act on the listener as its clients do.
func TestCommand_NoListenerToken(t *testing.T) {
	t.Setenv("STEPSEQ_TOKEN", "a-listener-token-0123456789")
	t.Setenv("NOTIFY_TEST_KEPT", "kept")
	for _, tc := range []struct {
		name string
		sink func(argv []string) SinkConfig
	}{
		{"--notify-command", func(argv []string) SinkConfig { return SinkConfig{Command: argv} }},
		{"plan notify", func(argv []string) SinkConfig {
			return PlanSinks([]planspec.NotifySink{{Command: argv}})[0]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "records.jsonl")
			n, err := New(Config{Dir: t.TempDir(), Sinks: []SinkConfig{tc.sink(helperArgv("record", out))}, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer closeNotifier(t, n)
			if _, err := n.Emit(Notice{Plan: "p", Step: "s", Try: 1, Status: "done"}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the command's record", func() bool { return len(readRecords(t, out)) == 1 })
			env := readRecords(t, out)[0].Env
			if v, ok := env["STEPSEQ_TOKEN"]; ok {
				t.Errorf("the command inherited STEPSEQ_TOKEN=%q", v)
			}
			if env["NOTIFY_TEST_KEPT"] != "kept" {
				t.Errorf("the command lost the rest of the environment: NOTIFY_TEST_KEPT=%q", env["NOTIFY_TEST_KEPT"])
			}
		})
	}
}
