package web

import (
	"net/http"
	"strings"
	"testing"
)

// TestHandler_PageSaysSandboxes: the page says which steps run sandboxed and
// which edit unattended without a sandbox, escaped as every text is.
func TestHandler_PageSaysSandboxes(t *testing.T) {
	v := sampleView()
	v.Sandbox = []string{"sandboxed: paper (no network)", "unattended edits without a sandbox: review: claude <b>"}
	body := get(t, New(newFakeSource(v), Options{}), http.MethodGet, "/").Body.String()
	for _, w := range []string{`data-sandbox`, "<li>sandboxed: paper (no network)</li>", "review: claude &lt;b&gt;"} {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
}
