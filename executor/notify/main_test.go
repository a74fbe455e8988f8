package notify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// The tests' command sink is this test binary, run again as a helper:
//
//	notify-helper record FILE [GATE]   append {stdin, env, dir} as one line to FILE;
//	                                   exit 3 instead while GATE is given and missing
//	notify-helper failfirst MARK FILE  fail once (creating MARK), then record to FILE
//	notify-helper hang PIDS            start a child, write "leader child" pids to
//	                                   PIDS, and block with SIGTERM ignored (as the child)
//	notify-helper block                block with SIGTERM ignored
//	notify-helper notifier WS URL N    emit N reports to a webhook from WS, write
//	                                   their IDs to WS/ids, then wait to be killed
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "notify-helper" {
		os.Exit(helper(os.Args[2], os.Args[3:]))
	}
	// A race build pauses a second as it exits, which each helper a sink runs
	// would add to the test: the helpers inherit no pause.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	goleak.VerifyTestMain(m)
}

// helperArgv is the command sink that runs this binary as the helper.
func helperArgv(mode string, args ...string) []string {
	return append([]string{os.Args[0], "notify-helper", mode}, args...)
}

// helperRecord is one line written by the record mode.
type helperRecord struct {
	Stdin string            `json:"stdin"`
	Env   map[string]string `json:"env"`
	Dir   string            `json:"dir"`
}

func helper(mode string, args []string) int {
	switch mode {
	case "record":
		if len(args) > 1 {
			if _, err := os.Stat(args[1]); err != nil {
				fmt.Fprintln(os.Stderr, "gate closed")
				return 3
			}
		}
		return writeRecord(args[0])
	case "failfirst":
		if _, err := os.Stat(args[0]); err != nil {
			_ = os.WriteFile(args[0], nil, 0o644)
			fmt.Fprintln(os.Stderr, "first attempt fails")
			return 1
		}
		return writeRecord(args[1])
	case "hang":
		signal.Ignore(syscall.SIGTERM)
		child := exec.Command(os.Args[0], "notify-helper", "block")
		if err := child.Start(); err != nil {
			return 1
		}
		tmp := args[0] + ".tmp"
		_ = os.WriteFile(tmp, fmt.Appendf(nil, "%d %d\n", os.Getpid(), child.Process.Pid), 0o644)
		_ = os.Rename(tmp, args[0])
		select {}
	case "block":
		signal.Ignore(syscall.SIGTERM)
		select {}
	case "notifier":
		return notifierProcess(args[0], args[1], args[2])
	}
	return 2
}

func writeRecord(path string) int {
	in, _ := io.ReadAll(os.Stdin)
	rec := helperRecord{Stdin: string(in), Env: map[string]string{}}
	rec.Dir, _ = os.Getwd()
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "STEPSEQ_") || strings.HasPrefix(k, "NOTIFY_TEST_") {
			rec.Env[k] = v
		}
	}
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 1
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return 1
	}
	return 0
}

// readRecords reads what the record mode wrote; none when the file is missing.
func readRecords(t *testing.T, path string) []helperRecord {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []helperRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r helperRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func notifierProcess(ws, url, count string) int {
	n, err := New(Config{Dir: ws, Sinks: []SinkConfig{{Webhook: url}}, Retry: quickRetry,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, _ := strconv.Atoi(count)
	var ids []byte
	for i := range c {
		r, err := n.Emit(Notice{Plan: "p", Step: "s", Try: i + 1, Status: "milestone"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ids = append(append(ids, r.ID...), '\n')
	}
	if err := os.WriteFile(filepath.Join(ws, "ids.tmp"), ids, 0o644); err != nil {
		return 1
	}
	if err := os.Rename(filepath.Join(ws, "ids.tmp"), filepath.Join(ws, "ids")); err != nil {
		return 1
	}
	select {}
}
