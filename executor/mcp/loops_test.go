package mcp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServer_ReviewRoundsPulled drives examples/plans/review-rounds.yaml to the
// end of each of its three branches with a pull client over MCP: the plan as it
// is, its steps pulled (agent: mcp), each taken with step_current and answered
// with step_report done and its result.
func TestServer_ReviewRoundsPulled(t *testing.T) {
	example, err := os.ReadFile("../../examples/plans/review-rounds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type answer map[string]any
	for _, tc := range []struct {
		name     string
		reviews  []int  // findings of each round's review
		unchange int    // the round whose fixer changed no code (0: none)
		want     string // the steps taken, @round
		status   string
		ended    string
	}{
		{name: "converged after 2 rounds", reviews: []int{2, 0},
			want: "review@1 respond@1 resolve@1 review@2 publish", status: "DONE", ended: "exit"},
		{name: "nothing more to change", reviews: []int{4}, unchange: 1,
			want: "review@1 respond@1 publish", status: "DONE", ended: "exit"},
		{name: "did not converge", reviews: []int{3, 2, 1},
			want: "review@1 respond@1 resolve@1 review@2 respond@2 resolve@2 review@3 respond@3 resolve@3", status: "IN_PROGRESS", ended: "max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorkspace(t)
			cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "reviewer")
			out, errText := call(t, cs, "plan_submit", map[string]any{"name": "review-rounds",
				"yaml": "agent: mcp\n" + string(example), "params": map[string]any{"max_rounds": 3}})
			if errText != "" {
				t.Fatalf("plan_submit: %v %s", out, errText)
			}
			var taken []string
			round, last := 0, ""
			for range 20 {
				step, final := next(t, cs, last)
				if step == nil {
					if final["status"] != tc.status {
						t.Fatalf("the plan ended %v, want %s", final["status"], tc.status)
					}
					loops, _ := final["loops"].([]any)
					if len(loops) != 1 || loops[0].(map[string]any)["ended"] != tc.ended {
						t.Fatalf("loops %v, want one ended by %s", final["loops"], tc.ended)
					}
					break
				}
				id, token := step["id"].(string), step["token"].(string)
				last = token
				progress, _ := step["progress"].(string)
				if id == "review" {
					round++
					if !strings.HasPrefix(step["prompt"].(string), fmt.Sprintf("[Round %d/3]", round)) || progress != fmt.Sprintf("round %d/3, step 1/3", round) {
						t.Errorf("review in round %d offered with prompt %q, progress %q", round, step["prompt"], progress)
					}
				}
				if id == "publish" {
					taken = append(taken, id)
					if err := os.WriteFile(filepath.Join(w.rt.WS.Dir, "review.md"), []byte("# Review\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				} else {
					taken = append(taken, fmt.Sprintf("%s@%d", id, round))
				}
				var result answer
				switch id {
				case "review":
					result = answer{"doc_path": fmt.Sprintf("review-%d.md", round), "findings_total": tc.reviews[round-1]}
				case "respond":
					result = answer{"fixed_count": tc.reviews[round-1], "code_changed": round != tc.unchange}
				}
				if out, errText := call(t, cs, "step_report", report(token, "accepted", nil)); out["accepted"] != true {
					t.Fatalf("%s accepted: %v %s", id, out, errText)
				}
				var res any
				if result != nil {
					res = map[string]any(result)
				}
				if out, errText := call(t, cs, "step_report", report(token, "done", res)); out["accepted"] != true {
					t.Fatalf("%s done: %v %s", id, out, errText)
				}
			}
			if got := strings.Join(taken, " "); got != tc.want {
				t.Fatalf("took %q\nwant %q", got, tc.want)
			}
		})
	}
}

// next waits for the next offer (a token other than last), or for the plan to
// end (DONE, or blocked): then it returns the status.
func next(t *testing.T, cs *sdk.ClientSession, last string) (step, status map[string]any) {
	t.Helper()
	deadline := time.Now().Add(effectWait)
	for time.Now().Before(deadline) {
		cur, _ := call(t, cs, "step_current", map[string]any{})
		if s, ok := cur["step"].(map[string]any); ok && s["token"] != last {
			return s, nil
		}
		st, _ := call(t, cs, "status", map[string]any{})
		waiting, _ := st["waitingFor"].(map[string]any)
		if st["status"] == "DONE" || waiting["action"] == "blocked" {
			return nil, st
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("no offer and no end within 20s")
	return nil, nil
}
