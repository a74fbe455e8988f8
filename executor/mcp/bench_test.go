package mcp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

func median(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}

// BenchmarkStepReport times step_report until state.json holds the report: the
// tool call over the in-memory transport, the loop's verdict and the write.
func BenchmarkStepReport(b *testing.B) {
	w := newWorkspace(b)
	srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	cs := connect(b, srv, "bench")
	if out, errText := call(b, cs, "plan_submit", map[string]any{"name": "pull", "yaml": pullPlan}); out["status"] != core.PlanActive {
		b.Fatalf("plan_submit: %v %s", out, errText)
	}
	token := waitTool(b, cs, "step_current", map[string]any{}, func(o map[string]any) bool { return o["step"] != nil })["step"].(map[string]any)["token"].(string)
	call(b, cs, "step_report", report(token, "accepted", nil))
	sf := &store.StateFile{Path: w.rt.WS.State}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		summary := fmt.Sprintf("milestone %d", i)
		args := report(token, "milestone", nil)
		args["summary"] = summary
		start := time.Now()
		if out, errText := call(b, cs, "step_report", args); out["accepted"] != true {
			b.Fatalf("milestone refused: %v %s", out, errText)
		}
		for {
			st, err := sf.Read()
			if err == nil {
				if r := st.StepRuns["fetch"].Reports; len(r) > 0 && r[len(r)-1].Summary == summary {
					break
				}
			}
			if time.Since(start) > 10*time.Second {
				b.Fatal("state.json never held the report")
			}
		}
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(median(times), "ms-median/report")
}

// BenchmarkStatus1000 times tools/call status on a plan of 1,000 steps.
func BenchmarkStatus1000(b *testing.B) {
	var plan strings.Builder
	plan.WriteString("agent: mcp\nsteps:\n")
	for i := range 1000 {
		fmt.Fprintf(&plan, "  - id: s%d\n    title: Step %d\n    instruction: Do step %d\n    requiredOutputs: [out/%d.md]\n", i, i, i, i)
	}
	p, err := planpkg.ParsePlan(strings.NewReader(plan.String()), "big.yaml")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), p.State("plans/big.yaml", "h").Marshal(), 0o644); err != nil {
		b.Fatal(err)
	}
	w := workspaceAt(b, dir)
	rpc := rawSession(b, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}))
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","arguments":{}}}` + "\n")
	if resp := rpc.call(b, req); !bytes.Contains(resp, []byte(`"id":"s999"`)) {
		b.Fatalf("status: %.300s", resp)
	}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		rpc.call(b, req)
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(median(times), "ms-median/status")
}

// rawRPC is a client that speaks JSON-RPC lines to a server over pipes and does
// not decode the answers: what a call costs the server, transport included.
type rawRPC struct {
	w io.Writer
	r *bufio.Reader
}

func rawSession(b *testing.B, srv *sdk.Server) *rawRPC {
	b.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ss, err := srv.Connect(context.Background(), &sdk.IOTransport{Reader: inR, Writer: outW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { inW.Close(); ss.Close() })
	rpc := &rawRPC{w: inW, r: bufio.NewReaderSize(outR, 1<<20)}
	rpc.call(b, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n"))
	if _, err := inW.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}` + "\n")); err != nil {
		b.Fatal(err)
	}
	return rpc
}

func (c *rawRPC) call(b *testing.B, req []byte) []byte {
	if _, err := c.w.Write(req); err != nil {
		b.Fatal(err)
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		b.Fatal(err)
	}
	return line
}
