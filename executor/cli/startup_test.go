package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStartup_InitIsLazy: every command, --version included, runs the init of
// every package linked in, so stepseq's own packages must do no real work
// there: templates, regexps and schemas are made on first use. Allocation
// counts, which GODEBUG=inittrace reports and which do not vary from run to
// run, stand for that work (a parsed template is over a thousand). Nor may the
// binary link the Prometheus client or protobuf, whose init (a default registry
// with its collectors, every message descriptor) cost a millisecond and a half
// of every command's start: executor/metrics writes the series. Nor a second
// JSON Schema library beside the one the MCP SDK links: santhosh-tekuri's
// compiles every draft's metaschema at init (21,287 allocations, 1.7 MB).
func TestStartup_InitIsLazy(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "stepseq")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/stepseq/stepseq").CombinedOutput(); err != nil {
		t.Fatal(&buildError{pkg: "github.com/stepseq/stepseq", out: string(out)})
	}
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("--version: %v\n%s", err, stderr.String())
	}
	budget := map[string]int{ // allocations at init, at most
		"github.com/stepseq/stepseq":      100,
		"github.com/google/jsonschema-go": 500,
	}
	seen := 0
	for line := range strings.Lines(stderr.String()) {
		// init pkg @0.12 ms, 0.34 ms clock, 56 bytes, 7 allocs
		f := strings.Fields(line)
		if len(f) < 11 || f[0] != "init" || f[10] != "allocs" {
			continue
		}
		allocs, err := strconv.Atoi(f[9])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", line, err)
		}
		for _, heavy := range []string{"github.com/prometheus/", "google.golang.org/protobuf/", "github.com/santhosh-tekuri/"} {
			if strings.HasPrefix(f[1], heavy) {
				t.Errorf("the binary links %s, whose init every command pays", f[1])
			}
		}
		for prefix, limit := range budget {
			if f[1] == prefix || strings.HasPrefix(f[1], prefix+"/") || prefix == "github.com/stepseq/stepseq" && f[1] == "main" {
				seen++
				if allocs > limit {
					t.Errorf("init of %s: %d allocations, want at most %d: make its package-level work lazy", f[1], allocs, limit)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatalf("no init of stepseq's packages in the trace:\n%s", stderr.String())
	}
}
