package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A fakeagent with FAKEAGENT_ANSWERS set answers as a worker of a plan whose
// prompts it does not read (examples/plans/review-rounds.yaml): the file holds,
// by step id, the answers of its successive runs, each
//
//	{"result": {...}, "write": "path", "wait": "path"}
//
// The n-th run of a step (counted in .answers/STEP beside the file) writes its
// file, reports accepted, waits for its wait file when it has one (for a
// minute at most), then reports done with its result through stepseq report,
// and exits 0. A step with no answer left reports done without a result.

// answer runs the answer of this run of the step; false when the mode is off.
func answer() bool {
	file := os.Getenv("FAKEAGENT_ANSWERS")
	if file == "" {
		return false
	}
	step := os.Getenv("STEPSEQ_STEP")
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(3)
	}
	var answers map[string][]struct {
		Result json.RawMessage `json:"result"`
		Write  string          `json:"write"`
		Wait   string          `json:"wait"`
	}
	if err := json.Unmarshal(data, &answers); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent: answers:", err)
		os.Exit(3)
	}
	counter := filepath.Join(filepath.Dir(file), ".answers", step)
	seen, _ := os.ReadFile(counter)
	n, _ := strconv.Atoi(strings.TrimSpace(string(seen)))
	writeFile(counter, strconv.Itoa(n+1))
	var result json.RawMessage
	wait := ""
	if list := answers[step]; n < len(list) {
		result, wait = list[n].Result, list[n].Wait
		if list[n].Write != "" {
			writeFile(list[n].Write, "written by fakeagent\n")
		}
	}
	for _, status := range []string{"accepted", "done"} {
		if status == "done" && wait != "" {
			awaitFile(wait)
		}
		args := []string{"report", status, "--summary", "fake " + status, "--evidence", "evidence of " + status,
			"--risk", "low — a test", "--next", "the next thing"}
		if status == "done" && len(result) > 0 {
			args = append(args, "--result", string(result))
		}
		if out, err := exec.Command("stepseq", args...).CombinedOutput(); err != nil {
			fmt.Printf("report %s refused: %s", status, out)
			os.Exit(1)
		}
	}
	return true
}

// awaitFile waits until path exists, polling with a deadline of a minute: the
// script's go-ahead to an agent that stands for a step that takes a while.
func awaitFile(path string) {
	for deadline := time.Now().Add(effectWait); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "fakeagent: %s never came\n", path)
			os.Exit(3)
		}
	}
}
