package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A retry of a DONE step is refused with not_allowed, whether the server asks
// the sidecar in its own process or acts through the workspace's files: both
// take the engine's one check.
func TestServer_RetryOfDoneStepRefused(t *testing.T) {
	refused := func(t *testing.T, srv Options) {
		t.Helper()
		cs := connect(t, NewServer(srv), "worker")
		out, errText := callRawCode(t, cs, "retry", map[string]any{"step": "fetch"})
		if out != string(NotAllowed) || !strings.Contains(errText, "step fetch is done, not blocked or failed") {
			t.Errorf("retry of a DONE step: code %q, %q; want not_allowed, refused", out, errText)
		}
	}
	t.Run("sidecar", func(t *testing.T) {
		w := newWorkspace(t)
		srv := NewServer(Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
		drive(t, connect(t, srv, "worker"))
		refused(t, Options{Runtime: w.rt, Engine: SidecarEngine(w.sc)})
	})
	t.Run("files", func(t *testing.T) {
		w := newWorkspace(t)
		rt, eng := filesRuntime(t, w.rt.WS.State)
		drive(t, connect(t, NewServer(Options{Runtime: rt, Engine: eng}), "worker"))
		refused(t, Options{Runtime: rt, Engine: eng})
	})
}

// callRawCode calls tool and returns its refusal's code and text.
func callRawCode(t *testing.T, cs *sdk.ClientSession, tool string, args any) (string, string) {
	t.Helper()
	res, out := callRaw(t, cs, tool, args)
	if !res.IsError {
		return "", ""
	}
	code, _ := out["code"].(string)
	return code, strings.Join(toStrings(out["reasons"]), "\n")
}
