package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInitClaude_ServerSpeaksMCP: the server `init --claude` registers, started as
// Claude Code starts it (its command from PATH, its args, in the project's folder),
// speaks MCP with stepseq's tools, and its workspace is the project: it runs the
// project's plan, and a plan submitted through it lands in the project's plans/.
func TestInitClaude_ServerSpeaksMCP(t *testing.T) {
	t.Parallel()
	stepseq, _ := builtBinaries(t)
	bin := filepath.Dir(stepseq)
	proj := t.TempDir()
	init := exec.Command(stepseq, "init", "--claude", proj)
	init.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("init --claude: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(proj, ".mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Servers map[string]MCPServer `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	srv, ok := cfg.Servers[ClaudeServerName]
	if !ok || srv.Type != "stdio" {
		t.Fatalf(".mcp.json registers %+v, want a stdio server %q", cfg.Servers, ClaudeServerName)
	}

	cmd := exec.Command(filepath.Join(bin, srv.Command), srv.Args...)
	cmd.Dir = proj
	cmd.Env = append(os.Environ(), "STEP_AGENT_CMD=")
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "init-claude-test", Version: "1"}, nil).
		Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to %s %v: %v", srv.Command, srv.Args, err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"plan_submit", "plan_validate", "status", "step_current", "step_report"} {
		if !slices.Contains(names, want) {
			t.Errorf("the server offers %v, not %s", names, want)
		}
	}
	// Merely started, as Claude Code starts it at every session start, the
	// server drives nothing: the example plan is shown, not applied. Once the
	// client acts (run_resume), its sidecar applies the project's plan (init's
	// example), and a plan submitted through it queues in the project's plans
	// folder.
	if _, err := os.Stat(filepath.Join(proj, "state.json")); err == nil {
		t.Fatal("the server applied the project's plan before any client acted")
	}
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run_resume", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("run_resume: %v %+v", err, res)
	}
	waitFor(t, "the project's example plan in its state.json", func() bool {
		b, err := os.ReadFile(filepath.Join(proj, "state.json"))
		return err == nil && stepQueueHead(b) == "outline"
	})
	plan := "name: hello\nsteps:\n  - id: hi\n    title: Say hi\n    instruction: write hi.txt\n    requiredOutputs: [hi.txt]\n"
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "plan_submit", Arguments: map[string]any{"name": "hello", "yaml": plan}})
	if err != nil || res.IsError {
		t.Fatalf("plan_submit: %v %+v", err, res)
	}
	if _, err := os.Stat(filepath.Join(proj, "plans", "hello.yaml")); err != nil {
		t.Errorf("the submitted plan is not in the project's plans folder: %v", err)
	}
}

// stepQueueHead is the first step id of a state's queue, "" when none.
func stepQueueHead(state []byte) string {
	var st struct {
		StepQueue []string `json:"stepQueue"`
	}
	if json.Unmarshal(state, &st) != nil || len(st.StepQueue) == 0 {
		return ""
	}
	return st.StepQueue[0]
}
