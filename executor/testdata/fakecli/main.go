// Command fakecli stands in for an agent CLI (claude, codex, gemini, …) in
// executor's tests: copied under the CLI's name into a test's bin folder, it reads
// its stdin to the end, records its argv, stdin and environment to <name>.record
// beside itself (one JSON line per run), then prints and exits as <name>.script
// there says: {"stdout": "...", "stderr": "...", "exit": N}; with "runs": [...]
// of those, the n-th run answers as the n-th (the last one once they are spent).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Record is one run, as the tests read it.
type Record struct {
	Argv   []string          `json:"argv"`
	Stdin  string            `json:"stdin"`
	Fd0    string            `json:"fd0"` // what the agent's stdin is
	Env    map[string]string `json:"env"`
	Script string            `json:"script"`
	Start  string            `json:"start"` // when it ran, RFC 3339 with nanoseconds
}

type script struct {
	Stdout string   `json:"stdout"`
	Stderr string   `json:"stderr"`
	Exit   int      `json:"exit"`
	Runs   []script `json:"runs"`
}

func main() {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecli:", err)
		os.Exit(3)
	}
	dir, name := filepath.Dir(self), filepath.Base(os.Args[0])
	in, _ := io.ReadAll(os.Stdin) // blocks for as long as stdin is open
	fd0, _ := os.Readlink("/proc/self/fd/0")
	rec := Record{Argv: os.Args, Stdin: string(in), Fd0: fd0, Env: map[string]string{}, Start: time.Now().Format(time.RFC3339Nano)}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		rec.Env[k] = v
	}
	var sc script
	if b, err := os.ReadFile(filepath.Join(dir, name+".script")); err == nil {
		rec.Script = string(b)
		if err := json.Unmarshal(b, &sc); err != nil {
			fmt.Fprintln(os.Stderr, "fakecli: bad script:", err)
			os.Exit(3)
		}
	}
	if n := len(sc.Runs); n > 0 {
		done, _ := os.ReadFile(filepath.Join(dir, name+".record"))
		sc = sc.Runs[min(strings.Count(string(done), "\n"), n-1)]
	}
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(filepath.Join(dir, name+".record"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecli:", err)
		os.Exit(3)
	}
	f.Write(append(line, '\n'))
	f.Close()
	fmt.Fprint(os.Stdout, sc.Stdout)
	fmt.Fprint(os.Stderr, sc.Stderr)
	os.Exit(sc.Exit)
}
