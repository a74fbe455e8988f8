package mcp

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// A step waiting out a usage limit: MCP's status shows it waiting, with the time
// it runs again.
func TestServer_StatusShowsALimitWait(t *testing.T) {
	dir := t.TempDir()
	since, until := planspec.FormatISO(time.Now()), planspec.FormatISO(time.Now().Add(time.Hour))
	state := `{"plan":{"steps":{"s1":{"title":"S1","instruction":"do s1"}}},"stepQueue":["s1"],"currentStep":0,` +
		`"stepRuns":{"s1":{"status":"PENDING","tries":0,"lastRunIso":"` + since + `","phase":"waiting","stepseq":{"startedIso":"` + since + `",` +
		`"limit":{"sinceIso":"` + since + `","untilIso":"` + until + `","stated":true,"waits":1,"agent":"claude","error":"claude: You've hit your 5-hour limit"}}}},` +
		`"stepDelayMinutes":0,"blockers":[],"status":"IN_PROGRESS","stepseq":{"agent":"claude"}}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	w := workspaceAt(t, dir)
	cs := connect(t, NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)}), "person")
	out, errText := call(t, cs, "status", map[string]any{})
	if errText != "" {
		t.Fatal(errText)
	}
	step := out["steps"].([]any)[0].(map[string]any)
	waiting := out["waitingFor"].(map[string]any)
	if step["phase"] != planspec.PhaseWaiting || waiting["action"] != "waiting" || waiting["at"] != until {
		t.Errorf("status: step %v, waiting for %v", step, waiting)
	}
}
