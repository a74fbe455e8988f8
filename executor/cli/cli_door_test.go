package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
)

const doorToken = "a-token-of-enough-length-0123456789"

// listenWatch runs watch in process with args and waits until /readyz on addr
// answers; it returns the logs so far and stops the sidecar at the test's end.
func listenWatch(t *testing.T, addr string, args ...string) *syncBuffer {
	t.Helper()
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"watch", "--log-level", "warn"}, args...), io.Discard, &logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	waitFor(t, "/readyz 200", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("watch ended: %v\n%s", err, logs.String())
		default:
		}
		code, _, err := get("http://" + addr + "/readyz")
		return err == nil && code == http.StatusOK
	})
	return &logs
}

func request(t *testing.T, method, url string, hdr map[string]string, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestWatch_ListenBeyondLoopbackNeedsToken: without a token, watch refuses to
// listen on every interface, with exit 2 and how to give one; --insecure-listen
// serves anyway and says so in the log.
func TestWatch_ListenBeyondLoopbackNeedsToken(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STEPSEQ_TOKEN", "")
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"watch", "--listen", ":0", dir}, io.Discard, &stderr)
	if code := exitCode(err, &stderr); code != 2 {
		t.Fatalf("watch --listen :0 without a token: exit %d (%v), want 2", code, err)
	}
	for _, want := range []string{"--listen :0 serves beyond loopback without a token", "--token-file", "STEPSEQ_TOKEN", "--insecure-listen"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, store.MetaDir)); !os.IsNotExist(err) {
		t.Errorf("the refused watch touched the workspace: %v", err)
	}
	short := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"watch", "--listen", ":0", "--token-file", short, dir}, io.Discard, &stderr)
	if code := exitCode(err, &stderr); code != 2 || !strings.Contains(err.Error(), "want at least 16") {
		t.Fatalf("a short token: exit %d (%v), want 2", code, err)
	}

	addr := freeAddr(t)
	port := addr[strings.LastIndexByte(addr, ':'):]
	logs := listenWatch(t, addr, "--listen", "0.0.0.0"+port, "--insecure-listen", dir)
	if !strings.Contains(logs.String(), "--insecure-listen: serving beyond loopback without a token") {
		t.Errorf("--insecure-listen is not logged:\n%s", logs.String())
	}
}

// TestWatch_ListenLocalhost: --listen localhost:P is served, without a token,
// on the loopback address the name resolves to.
func TestWatch_ListenLocalhost(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STEPSEQ_TOKEN", "")
	addr := freeAddrOn(t, "127.0.0.1") // where localhost resolves
	port := addr[strings.LastIndexByte(addr, ':'):]
	listenWatch(t, addr, "--listen", "localhost"+port, dir)
	if code, _, hdr := request(t, http.MethodPost, "http://"+addr+"/mcp", mcpHeaders, initializeBody); code != 200 || hdr.Get("Mcp-Session-Id") == "" {
		t.Errorf("/mcp on localhost without a token = %d", code)
	}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

var mcpHeaders = map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

func with(h map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for hk, hv := range h {
		out[hk] = hv
	}
	return out
}

// TestWatch_Token: with STEPSEQ_TOKEN, /mcp and the page want it, the probes
// and /metrics do not, and every refusal is counted; a foreign Host or Origin
// is refused on loopback.
func TestWatch_Token(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STEPSEQ_TOKEN", doorToken)
	addr := freeAddr(t)
	listenWatch(t, addr, "--listen", addr, dir)
	base := "http://" + addr
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _, _ := request(t, http.MethodGet, base+p, nil, ""); code != 200 {
			t.Errorf("%s without a token = %d, want 200", p, code)
		}
	}
	if code, body, _ := request(t, http.MethodPost, base+"/mcp", mcpHeaders, initializeBody); code != 401 || !strings.Contains(body, "Authorization: Bearer") {
		t.Errorf("/mcp without a token = %d %q", code, body)
	}
	bearer := with(mcpHeaders, "Authorization", "Bearer "+doorToken)
	if code, body, hdr := request(t, http.MethodPost, base+"/mcp", bearer, initializeBody); code != 200 || hdr.Get("Mcp-Session-Id") == "" {
		t.Errorf("/mcp initialize with the token = %d %q", code, body)
	}
	if code, _, _ := request(t, http.MethodPost, base+"/mcp", with(bearer, "Origin", "http://evil.example"), initializeBody); code != 403 {
		t.Errorf("/mcp from another origin = %d, want 403", code)
	}
	if code, _, _ := request(t, http.MethodPost, base+"/mcp", with(bearer, "Origin", base), initializeBody); code != 200 {
		t.Errorf("/mcp from its own origin = %d, want 200", code)
	}
	for _, p := range []string{"/", "/events"} {
		if code, _, _ := request(t, http.MethodGet, base+p, nil, ""); code != 401 {
			t.Errorf("%s without a token = %d, want 401", p, code)
		}
	}
	code, _, hdr := request(t, http.MethodGet, base+"/?token="+doorToken, nil, "")
	if code != http.StatusSeeOther || !strings.Contains(hdr.Get("Set-Cookie"), "HttpOnly") {
		t.Fatalf("/?token= = %d %v", code, hdr)
	}
	cookie := strings.SplitN(hdr.Get("Set-Cookie"), ";", 2)[0]
	if code, body, _ := request(t, http.MethodGet, base+"/", map[string]string{"Cookie": cookie}, ""); code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("the page with its cookie = %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	req.Host = "attacker.example"
	req.Header.Set("Cookie", cookie)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("the page under a rebound name: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	_, metrics, _ := request(t, http.MethodGet, base+"/metrics", nil, "")
	for _, want := range []string{`stepseq_http_unauthorized_total{face="mcp"} 1`, `stepseq_http_unauthorized_total{face="page"} 1`, `stepseq_http_unauthorized_total{face="events"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestWatch_AllowAgentMCP: with --allow-agent mcp nothing launches: a plan
// that would run STEP_AGENT_CMD is refused at intake, its record saying why,
// and state.json is never written.
func TestWatch_AllowAgentMCP(t *testing.T) {
	dir := workspaceWith(t, twoSteps)
	marker := filepath.Join(t.TempDir(), "ran")
	t.Setenv("STEP_AGENT_CMD", "touch "+marker)
	addr := freeAddr(t)
	listenWatch(t, addr, "--listen", addr, "--allow-agent", "mcp", dir)
	var rec core.PlanRecord
	waitFor(t, "the plan's record", func() bool {
		data, err := os.ReadFile(filepath.Join(dir, store.MetaDir, "plans", "p.json"))
		return err == nil && json.Unmarshal(data, &rec) == nil
	})
	if rec.Status != core.PlanInvalid || len(rec.Errors) == 0 || !strings.Contains(rec.Errors[0], "plans/p.yaml: STEP_AGENT_CMD: agent [touch, "+marker+"] is not allowed: this stepseq runs only the agents --allow-agent names (mcp)") {
		t.Fatalf("record = %+v", rec)
	}
	for _, p := range []string{marker, filepath.Join(dir, "state.json")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists: %v", p, err)
		}
	}
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"watch", "--allow-agent", "bash", t.TempDir()}, io.Discard, &stderr)
	if code := exitCode(err, &stderr); code != 2 || !strings.Contains(err.Error(), `--allow-agent "bash": "bash" is a shell`) {
		t.Fatalf("--allow-agent bash: exit %d (%v), want 2", code, err)
	}
}

// TestWatch_ExposeEnvJournaled: the names --expose-env lets a plan from MCP
// read are journaled at start (the names, never their values); a value that is
// not one variable's name is a usage error, on watch and mcp alike.
func TestWatch_ExposeEnvJournaled(t *testing.T) {
	dir := workspaceWith(t, twoSteps)
	t.Setenv("STEP_AGENT_CMD", "true") // a sidecar starts only with an agent its plan can launch
	t.Setenv("STEPSEQ_TEST_DEPLOY", "value-of-deploy")
	addr := freeAddr(t)
	listenWatch(t, addr, "--listen", addr, "--expose-env", "STEPSEQ_TEST_DEPLOY", "--expose-env", "HOME", dir)
	var names []any
	waitFor(t, "the expose-env record", func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, store.MetaDir, "journal.jsonl"))
		if strings.Contains(string(data), "value-of-deploy") {
			t.Fatalf("the journal holds a value:\n%s", data)
		}
		for _, line := range strings.Split(string(data), "\n") {
			var e core.Entry
			if json.Unmarshal([]byte(line), &e) == nil && e.Event == "expose-env" {
				names, _ = e.Detail["names"].([]any)
				return true
			}
		}
		return false
	})
	if len(names) != 2 || names[0] != "HOME" || names[1] != "STEPSEQ_TEST_DEPLOY" {
		t.Errorf("journaled names = %v, want [HOME STEPSEQ_TEST_DEPLOY]", names)
	}
	for _, cmd := range []string{"watch", "mcp"} {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{cmd, "--expose-env", "A=B", t.TempDir()}, io.Discard, &stderr)
		if code := exitCode(err, &stderr); code != 2 || !strings.Contains(err.Error(), `--expose-env "A=B": want the name of one environment variable`) {
			t.Errorf("%s --expose-env A=B: exit %d (%v), want 2", cmd, code, err)
		}
	}
}
