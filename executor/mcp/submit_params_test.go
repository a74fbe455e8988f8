package mcp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
)

const greetPlan = `agent: mcp
params:
  count: {type: integer, minimum: 1, default: 1}
  who: {type: string}
summary:
  told: params.who
steps:
  - id: greet
    title: Greet ${params.who}
    instruction: Greet ${params.who} ${params.count} times
    resultFrom: file:out/greet.yaml
    result: {type: object, required: [greeted]}
`

// plan_submit {params}: params the schemas refuse are refused with
// invalid_params and every problem by its path, and nothing is written; the
// params given are the run's, its instruction rendered with them, and its
// summary shown by status.
func TestServer_SubmitParams(t *testing.T) {
	w := newWorkspace(t)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "worker")
	res, out := callRaw(t, cs, "plan_submit", map[string]any{"name": "greet", "yaml": greetPlan, "params": map[string]any{"count": 0, "extra": true}})
	reasons := toStrings(out["reasons"])
	if !res.IsError || out["code"] != string(InvalidParams) || len(reasons) != 3 ||
		!strings.HasPrefix(reasons[0], "params.extra: unknown param") || !strings.HasPrefix(reasons[1], "params.count: ") ||
		!strings.HasPrefix(reasons[2], "params.who: required") {
		t.Fatalf("bad params: isError %v, %v", res.IsError, out)
	}
	if w.exists(t, "plans/greet.yaml") {
		t.Error("a refused plan was written")
	}

	if _, errText := call(t, cs, "plan_submit", map[string]any{"name": "greet", "yaml": greetPlan, "params": map[string]any{"who": "Ada", "count": 2}}); errText != "" {
		t.Fatal(errText)
	}
	out = waitTool(t, cs, "step_current", map[string]any{}, func(m map[string]any) bool { return m["step"] != nil })
	cur, _ := out["step"].(map[string]any)
	if cur["prompt"] != "Greet Ada 2 times" || cur["resultFile"] != "out/greet.yaml" {
		t.Errorf("step_current = %v", cur)
	}
	// The worker reports done without a result: the file it wrote is the result.
	if err := os.MkdirAll(filepath.Join(w.rt.WS.Dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.rt.WS.Dir, "out/greet.yaml"), []byte("greeted: Ada\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errText := call(t, cs, "step_report", report(cur["token"].(string), "accepted", nil)); errText != "" {
		t.Fatal(errText)
	}
	if _, errText := call(t, cs, "step_report", report(cur["token"].(string), "done", nil)); errText != "" {
		t.Fatal(errText)
	}
	st := waitTool(t, cs, "status", map[string]any{}, func(m map[string]any) bool { return m["status"] == "DONE" && m["summary"] != nil })
	params, _ := st["params"].(map[string]any)
	summary, _ := st["summary"].(map[string]any)
	if params["who"] != "Ada" || params["count"] != float64(2) || summary["told"] != "Ada" {
		t.Errorf("status: params %v, summary %v", params, summary)
	}
	steps, _ := st["steps"].([]any)
	if s0, _ := steps[0].(map[string]any); fmt.Sprint(s0["result"]) != "map[greeted:Ada]" {
		t.Errorf("status: step %v", steps[0])
	}
}

func (w *workspace) exists(t *testing.T, rel string) bool {
	t.Helper()
	_, err := store.ReadFile(w.rt.WS.Dir+"/"+rel, store.PlanCap)
	return err == nil
}
