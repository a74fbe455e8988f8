package engine

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/planspec"
)

// resultStep is a step whose result comes from where from says, checked against
// {type: object, required: [count], properties: {count: {type: integer}}}.
func resultStep(instruction, from string, extra string) string {
	s := `"instruction":` + quoteJSON(instruction) + `,"resultFrom":` + quoteJSON(from) +
		`,"result":{"type":"object","required":["count"],"properties":{"count":{"type":"integer"}}}`
	if extra != "" {
		s += "," + extra
	}
	return s
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Each preset's CLI, faked with the output its real CLI prints, ends with a
// final message that holds the result among words: stepseq reads the message
// the way the preset reads its output, finds the JSON in it, checks it against
// the schema and keeps it as steps.s1.result; the next step's template reads it.
func TestCheck_ResultFromPresetOutput(t *testing.T) {
	for _, tc := range []struct {
		preset, stdout string
	}{
		{"claude", `{"type":"system","subtype":"init","session_id":"s1"}` + "\n" +
			claudeJSON(false, "Reviewed the paper.\n```json\n{\"count\": 3, \"doc\": \"r.md\"}\n```\n")},
		{"codex", `{"type":"thread.started","thread_id":"t-1"}` + "\n" +
			`{"type":"turn.started"}` + "\n" +
			`{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"thinking {\"count\": 9}"}}` + "\n" +
			`{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Done: {\"count\": 3, \"doc\": \"r.md\"}"}}` + "\n" +
			`{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":5}}` + "\n"},
		{"gemini", "{\n  \"session_id\": \"g-1\",\n  \"response\": \"{\\\"count\\\": 3, \\\"doc\\\": \\\"r.md\\\"}\",\n  \"stats\": {\"models\": {}}\n}\n"},
		{"opencode", `{"type":"step_start","timestamp":1,"sessionID":"ses_1","part":{"type":"step-start"}}` + "\n" +
			`{"type":"text","timestamp":2,"sessionID":"ses_1","part":{"type":"text","text":"First {\"count\": 1}"}}` + "\n" +
			`{"type":"text","timestamp":3,"sessionID":"ses_1","part":{"type":"text","text":"{\"count\": 3, \"doc\": \"r.md\"}"}}` + "\n" +
			`{"type":"step_finish","timestamp":4,"sessionID":"ses_1","part":{"type":"step-finish","reason":"stop"}}` + "\n"},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			bin := fakeBin(t, tc.preset)
			fakeScript(t, bin, tc.preset, tc.stdout, "", 0)
			w := newTestWS(t, plan(`"stepseq":{"agent":"`+tc.preset+`"}`,
				resultStep("review", planspec.ResultFromOutput, ""),
				`"instruction":"fix","instructionTemplate":"fix ${steps.s1.result.doc} (${steps.s1.result.count} findings)"`))
			if err := w.check(); err != nil {
				t.Fatal(err)
			}
			st := w.read()
			if st.Status != planspec.StatusDone {
				t.Fatalf("status %s, s1 error %v", st.Status, errText(st.Run("s1")))
			}
			if got := string(st.Run("s1").Result); got != `{"count":3,"doc":"r.md"}` {
				t.Errorf("steps.s1.result = %s", got)
			}
			runs := fakeRuns(t, bin, tc.preset)
			if len(runs) != 2 || !strings.Contains(strings.Join(runs[1].Argv, " "), "fix r.md (3 findings)") {
				t.Errorf("the second step's agent ran as %q", runs[len(runs)-1].Argv)
			}
		})
	}
}

func errText(r *planspec.StepRun) string {
	if r.Error == nil {
		return "<nil>"
	}
	return *r.Error
}

// A command given as a list prints JSON lines: its result is the last JSON
// value on stdout, which a later step's template and condition read.
func TestCheck_ResultFromCommandStdout(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, plan("",
		resultStep(`out:progress out:{"count":1} out:{"count":2,"name":"made"}`, planspec.ResultFromOutput, ""),
		`"instruction":"write","instructionTemplate":"write:${steps.s1.result.name}.txt","when":"steps.s1.result.count == 2"`))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	st := w.read()
	if st.Status != planspec.StatusDone || string(st.Run("s1").Result) != `{"count":2,"name":"made"}` {
		t.Fatalf("status %s, result %s, error %s", st.Status, st.Run("s1").Result, errText(st.Run("s1")))
	}
	if !w.exists("made.txt") {
		t.Error("the second step did not get the rendered name")
	}
}

// A result written to a YAML file in the workspace is read through the root,
// kept as JSON.
func TestCheck_ResultFromFile(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, plan("", resultStep("put:out/r.yaml=count:%203%0Adoc:%20r.md%0A", "file:out/r.yaml", "")))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	st := w.read()
	if st.Status != planspec.StatusDone || string(st.Run("s1").Result) != `{"count":3,"doc":"r.md"}` {
		t.Fatalf("status %s, result %s, error %s", st.Status, st.Run("s1").Result, errText(st.Run("s1")))
	}
}

// A result that fails its schema fails the try with every violation and its
// path; the retry's prompt carries them, and the last try blocks the plan.
func TestCheck_ResultFromOutputFailsItsSchema(t *testing.T) {
	t.Parallel()
	w := newTestWS(t, plan("", resultStep(`out:{"count":"three","extra":1}`, planspec.ResultFromOutput, `"retries":2`)))
	if err := w.check(); err != nil {
		t.Fatal(err)
	}
	st := w.read()
	run := st.Run("s1")
	if run.Status != planspec.StatusFailed || run.Tries != 2 || len(st.Blockers) != 1 {
		t.Fatalf("status %s tries %d blockers %q", run.Status, run.Tries, st.Blockers)
	}
	if e := errText(run); !strings.HasPrefix(e, "result from output: ") || !strings.Contains(e, "/count") {
		t.Errorf("error = %q, want the schema's violation at /count", e)
	}
	if len(run.Result) != 0 {
		t.Errorf("an invalid result was kept: %s", run.Result)
	}
}

// A result file the agent did not write fails the try with the reason; so does
// one that is not JSON or YAML, and one that leaves the workspace by a link.
func TestCheck_ResultFromFileMissing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, instruction, from, want string
	}{
		{"missing", "out:nothing", "file:out/r.json", "resultFrom: file:out/r.json: out/r.json does not exist"},
		{"not JSON or YAML", "put:r.json=%7B%22count%22:", "file:r.json", "r.json is neither JSON nor YAML"},
		{"no JSON on stdout", "out:just-words", planspec.ResultFromOutput, "no JSON value on the agent's stdout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newTestWS(t, plan("", resultStep(tc.instruction, tc.from, `"retries":1`)))
			if err := w.check(); err != nil {
				t.Fatal(err)
			}
			run := w.read().Run("s1")
			if run.Status != planspec.StatusFailed || !strings.Contains(errText(run), tc.want) {
				t.Errorf("status %s, error %q, want %q", run.Status, errText(run), tc.want)
			}
		})
	}
}

// A template that reads env() is refused before anything is launched, and the
// environment's value reaches no file: not the state check writes, its logs or
// its journal (secrets stay put).
func TestCheck_TemplateEnvNeverRendered(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-template-value"
	w := newTestWS(t, plan("",
		`"titleTemplate":"T ${env(\"STEPSEQ_TEST_SECRET\")}","instruction":"write","instructionTemplate":"write:${env(\"STEPSEQ_TEST_SECRET\")}.txt"`))
	w.env["STEPSEQ_TEST_SECRET"] = secret
	_ = w.check() // the step fails; what matters is what was written
	st := w.read()
	if st.Run("s1").Status == planspec.StatusDone || !strings.Contains(errText(st.Run("s1")), "pass the value as a param") {
		t.Errorf("s1: %s, error %q; want it failed with the fix", st.Run("s1").Status, errText(st.Run("s1")))
	}
	if logCount(w, "s1") != 0 {
		t.Errorf("s1's agent was launched %d times", logCount(w, "s1"))
	}
	err := filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), secret) {
			t.Errorf("%s holds the environment's value:\n%s", p, data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
