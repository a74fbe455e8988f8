package mcp

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The TypeScript SDK, a real third-party client, drives a pulled plan over stdio
// and over streamable HTTP, where it sends the listener's token. Its packages come from the npm registry once, with
// `make e2e-deps`, which `make test` runs.
func nodeE2E(t *testing.T, args ...string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("e2e", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("executor/mcp/e2e/node_modules is missing: run `make e2e-deps` (npm ci) first (%v)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: the e2e test needs Node.js 18 or later (%v)", err)
	}
	cmd := exec.Command(node, append([]string{"drive.mjs"}, args...)...)
	cmd.Dir = "e2e"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node drive.mjs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("%s", out)
}

func TestNodeClient_Stdio(t *testing.T) {
	nodeE2E(t, "stdio", stepseqBinary(t), t.TempDir())
}

func TestNodeClient_HTTP(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "the-e2e-token-0123456789"
	watch := exec.Command(stepseqBinary(t), "watch", "--listen", addr, dir)
	watch.Env = append(os.Environ(), "STEPSEQ_TOKEN="+token)
	watch.Stderr = &testLog{t: t}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = watch.Process.Signal(os.Interrupt)
		_ = watch.Wait()
	})
	deadline := time.Now().Add(effectWait)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("watch --listen never listened")
		}
		time.Sleep(5 * time.Millisecond)
	}
	nodeE2E(t, "http", "http://"+addr+"/mcp", token)
}
