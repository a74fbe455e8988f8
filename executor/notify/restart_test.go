package notify

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/metrics"
)

// Closed with reports undelivered to a webhook and a command, and made again on
// the same folder: each sink gets every report, in order, and what is emitted
// after the restart comes after, with IDs that sort after.
func TestNotifier_RestartDeliversWhatWasLeft(t *testing.T) {
	ws := t.TempDir()
	tmp := t.TempDir()
	out, gate := filepath.Join(tmp, "records.jsonl"), filepath.Join(tmp, "gate")
	h := newHook(t)
	h.down.Store(true)
	reg := metrics.NewRegistry()
	cfg := Config{Dir: ws, Logger: testLogger(t), Retry: quickRetry, Registerer: reg,
		Sinks: []SinkConfig{{Webhook: h.srv.URL}, {Command: []string{"/bin/sh", "-c", `test -e "$1" && r=$(cat) && printf '%s\n' "$r" >>"$2"`, "sh", gate, out}}}}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := emitN(t, n, 20, "before")
	eventually(t, "both sinks failing", func() bool {
		return h.requests.Load() > 0 && counter(t, reg, "stepseq_notify_failed_total", KindCommand) > 0
	})
	closeNotifier(t, n)
	if len(h.received()) != 0 || len(reportLines(t, out)) != 0 {
		t.Fatal("delivered while down")
	}

	h.down.Store(false)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	after := emitN(t, n, 5, "after")
	if after[0] <= before[len(before)-1] {
		t.Errorf("ID %s after the restart sorts before %s", after[0], before[len(before)-1])
	}
	want := append(before, after...)
	eventually(t, "every report at the webhook", func() bool { return len(firstSeen(h.received())) == len(want) })
	eventually(t, "every report at the command", func() bool { return len(reportLines(t, out)) >= len(want) })
	var cmdIDs []string
	for _, r := range reportLines(t, out) {
		cmdIDs = append(cmdIDs, r.ID)
	}
	if got := firstSeen(cmdIDs); !slices.Equal(got, want) {
		t.Errorf("command order %v, want %v", got, want)
	}
	eventually(t, "every report in the feed", func() bool { r, _ := Recent(ws, 100); return len(r) == len(want) })
	recent, _ := Recent(ws, 100)
	var feedIDs []string
	for _, r := range recent {
		feedIDs = append(feedIDs, r.ID)
	}
	if !slices.Equal(feedIDs, want) {
		t.Errorf("feed %v, want %v", feedIDs, want)
	}
}

// A notifier killed (SIGKILL) halfway through delivering: the next one on the
// same folder delivers the rest, in order, none lost.
func TestNotifier_KilledMidDelivery(t *testing.T) {
	ws := t.TempDir()
	h := newHook(t)
	cmd := exec.Command(os.Args[0], "notify-helper", "notifier", ws, h.srv.URL, "200")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	eventually(t, "some reports delivered", func() bool { return len(h.received()) >= 10 })
	h.down.Store(true)
	eventually(t, "the IDs written", func() bool { _, err := os.Stat(filepath.Join(ws, "ids")); return err == nil })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed = true
	b, err := os.ReadFile(filepath.Join(ws, "ids"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(b))
	delivered := len(firstSeen(h.received()))
	if delivered == len(want) {
		t.Log("every report was delivered before the kill")
	}

	h.down.Store(false)
	n, err := New(Config{Dir: ws, Sinks: []SinkConfig{{Webhook: h.srv.URL}}, Retry: quickRetry, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer closeNotifier(t, n)
	eventually(t, "every report at the webhook", func() bool { return len(firstSeen(h.received())) == len(want) })
	if got := firstSeen(h.received()); !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if repeats := len(h.received()) - len(want); repeats > 1 {
		t.Errorf("%d repeats; at most the one in flight at the kill expected", repeats)
	}
}

// reportLines reads the reports a command appended to path, one a line.
func reportLines(t *testing.T, path string) []Notice {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []Notice
	// Whole lines only: a command may be writing the last one.
	whole := string(data[:bytes.LastIndexByte(data, '\n')+1])
	for _, line := range strings.Split(strings.TrimSuffix(whole, "\n"), "\n") {
		if line == "" && whole == "" {
			break
		}
		var r Notice
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}
