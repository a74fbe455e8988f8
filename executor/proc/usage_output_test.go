package proc

import (
	"os"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// The outputs under testdata/usage are the CLIs' own, as their npm packages
// print them (claude 2.1.332, codex 0.171.0, gemini 0.61.0, opencode 1.18.33),
// each run against a model server on loopback that answered with known usage.

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/usage/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func cost(v float64) *float64 { return &v }

// bigClaude is the real claude result with an answer of n bytes ending in its
// JSON: the shape a long answer has, usage first and type after the answer.
func bigClaude(t testing.TB, n int) string {
	small := fixture(t, "claude-2.1.332.json")
	return strings.Replace(small, `"result":"{\"answer\": 42}"`, `"result":"`+strings.Repeat("x", n)+` {\"answer\": 42}"`, 1)
}

// exitOf is what the process capture keeps of stdout: the head, the tail, and
// the lines the preset asks to keep.
func exitOf(stdout string, tail int, keep string) core.Exit {
	c := capture{head: stdoutHead, keep: tail}
	c.lines.prefix = []byte(keep)
	for b := []byte(stdout); len(b) > 0; {
		n := min(len(b), 32<<10) // the pipe's pieces
		_, _ = c.Write(b[:n])
		b = b[n:]
	}
	return core.Exit{Stdout: c.String(), StdoutTail: c.Tail(), Lines: c.Lines()}
}

func TestAgent_Usage(t *testing.T) {
	claude := &planspec.Usage{Model: "claude-opus-5-5", InputTokens: 1200, OutputTokens: 80, CacheTokens: 5300, CostUSD: cost(0.0089)}
	for _, tc := range []struct {
		name, preset, stdout string
		tail                 int
		want                 *planspec.Usage
	}{
		{"claude json", "claude", fixture(t, "claude-2.1.332.json"), 0, claude},
		{"claude stream-json", "claude", fixture(t, "claude-2.1.332-stream.jsonl"), 0, claude},
		// An answer of 1 MB: the tail holds only its end and type; the usage
		// comes from the head.
		{"claude 1 MB answer", "claude", bigClaude(t, 1<<20), 0, claude},
		{"claude 1 MB answer, result from output", "claude", bigClaude(t, 1<<20), planspec.MaxResultOutput, claude},
		{"codex", "codex", fixture(t, "codex-0.171.0.jsonl"), 0, &planspec.Usage{InputTokens: 500, OutputTokens: 120, CacheTokens: 2000}},
		{"gemini", "gemini", fixture(t, "gemini-0.61.0.json"), 0, &planspec.Usage{Model: "gemini-3-pro", InputTokens: 5000, OutputTokens: 300, CacheTokens: 3000}},
		{"opencode", "opencode", fixture(t, "opencode-1.18.33.jsonl"), 0, &planspec.Usage{InputTokens: 2000, OutputTokens: 150, CacheTokens: 1000, CostUSD: cost(0.00855)}},
		// Two steps far apart: the first long gone from the tail.
		{"opencode, steps past the tail", "opencode", fixture(t, "opencode-1.18.33.jsonl") + strings.Repeat(`{"type":"text","part":{"text":"`+strings.Repeat("y", 1000)+`"}}`+"\n", 200) +
			fixture(t, "opencode-1.18.33.jsonl"), 0, &planspec.Usage{InputTokens: 4000, OutputTokens: 300, CacheTokens: 2000, CostUSD: cost(0.0171)}},
		{"claude, nothing printed", "claude", "", 0, nil},
		{"codex, turn failed", "codex", `{"type":"thread.started","thread_id":"t"}` + "\n" + `{"type":"turn.failed","error":{"message":"boom"}}` + "\n", 0, nil},
		{"a command", "", `{"usage": {"input_tokens": 5}}`, 0, nil},
		{"aider", "aider", "Tokens: 1.2k sent, 300 received. Cost: $0.01 message, $0.02 session.\n", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Agent{Preset: tc.preset}
			exit := exitOf(tc.stdout, tc.tail, a.UsageLines())
			got, err := a.Usage(exit)
			if err != nil {
				t.Fatal(err)
			}
			if !sameUsage(got, tc.want) {
				t.Fatalf("usage = %s, want %s", usageText(got), usageText(tc.want))
			}
		})
	}
}

func TestAgent_Usage_Malformed(t *testing.T) {
	for _, tc := range []struct{ preset, stdout, err string }{
		{"claude", strings.Replace(fixture(t, "claude-2.1.332.json"), `"total_cost_usd":0.0089`, `"total_cost_usd":"lots"`, 1), "claude: total_cost_usd: want a number"},
		{"claude", strings.Replace(fixture(t, "claude-2.1.332.json"), `"inputTokens":1200`, `"inputTokens":-5`, 1), "claude: usage: token counts must not be negative"},
		{"codex", `{"type":"turn.completed","usage":{"input_tokens":"many"}}` + "\n", "codex: turn.completed usage"},
		{"gemini", "{\n  \"response\": \"hi\",\n  \"stats\": {\"models\": 3}\n}\n", "gemini: stats"},
		{"opencode", `{"type":"step_finish","part":{"tokens":{"input":"x"}}}` + "\n", "opencode: step_finish"},
	} {
		a := Agent{Preset: tc.preset}
		u, err := a.Usage(exitOf(tc.stdout, 0, a.UsageLines()))
		if err == nil || !strings.Contains(err.Error(), tc.err) || u != nil {
			t.Errorf("%s: usage %s, err %v; want %q", tc.preset, usageText(u), err, tc.err)
		}
	}
}

func TestLineKeeper(t *testing.T) {
	k := lineKeeper{prefix: []byte(`{"type":"s`)}
	for _, piece := range []string{`{"ty`, `pe":"s1"}` + "\n" + `{"type":"t"}` + "\n", `{"type":"s2`, `"}` + "\n" + strings.Repeat("z", 100) + "\n" + `{"type":"s3"}`} {
		k.write([]byte(piece))
	}
	if got := strings.Join(k.all(), "|"); got != `{"type":"s1"}|{"type":"s2"}|{"type":"s3"}` {
		t.Fatalf("kept %q", got)
	}
	var many lineKeeper
	many.prefix = []byte("a")
	for range maxKeptLines + 1 {
		many.write([]byte("a\n"))
	}
	if all := many.all(); len(all) != maxKeptLines+1 || all[0] != "" {
		t.Fatalf("past the bound: %d lines, first %q", len(all), all[0])
	}
}

func sameUsage(a, b *planspec.Usage) bool {
	if a == nil || b == nil {
		return a == b
	}
	if (a.CostUSD == nil) != (b.CostUSD == nil) || a.CostUSD != nil && abs(*a.CostUSD-*b.CostUSD) > 1e-9 {
		return false
	}
	x, y := *a, *b
	x.CostUSD, y.CostUSD = nil, nil
	return x == y
}

func abs(f float64) float64 { return max(f, -f) }

func usageText(u *planspec.Usage) string {
	if u == nil {
		return "unknown"
	}
	c := "no cost"
	if u.CostUSD != nil {
		c = planspec.USD(*u.CostUSD)
	}
	return u.Model + " " + planspec.Thousands(u.InputTokens) + "/" + planspec.Thousands(u.OutputTokens) + "/" + planspec.Thousands(u.CacheTokens) + " " + c
}

// BenchmarkUsage_Claude1MB reads the usage of a 1 MB claude answer kept whole
// (a step whose result is its output), beside today's parse of its result
// (BenchmarkOutputResult_Claude1MB).
func BenchmarkUsage_Claude1MB(b *testing.B) {
	a := Agent{Preset: "claude"}
	exit := exitOf(bigClaude(b, 1<<20), planspec.MaxResultOutput, "")
	b.SetBytes(int64(len(exit.StdoutTail)))
	for b.Loop() {
		if u, err := a.Usage(exit); err != nil || u == nil {
			b.Fatal(u, err)
		}
	}
}

// BenchmarkUsage_Claude1MBTail is the usual step: only the tail is kept, and
// the usage is read from the head.
func BenchmarkUsage_Claude1MBTail(b *testing.B) {
	a := Agent{Preset: "claude"}
	exit := exitOf(bigClaude(b, 1<<20), 0, "")
	for b.Loop() {
		if u, err := a.Usage(exit); err != nil || u == nil {
			b.Fatal(u, err)
		}
	}
}

func BenchmarkOutputResult_Claude1MB(b *testing.B) {
	a := Agent{Preset: "claude"}
	exit := exitOf(bigClaude(b, 1<<20), planspec.MaxResultOutput, "")
	b.SetBytes(int64(len(exit.StdoutTail)))
	for b.Loop() {
		if _, err := a.OutputResult(exit); err != nil {
			b.Fatal(err)
		}
	}
}

// A claude 2.x error result too long for the tail, its type after the answer:
// its head says is_error, and the try fails with the start of its text.
func TestPreset_Judge_ClaudeLongErrorTypeLast(t *testing.T) {
	out := strings.Replace(bigClaude(t, 200<<10), `"is_error":false`, `"is_error":true`, 1)
	out = strings.Replace(out, `"subtype":"success"`, `"subtype":"error_during_execution"`, 1)
	p, _ := LookupPreset("claude")
	failed, _ := p.Judge(exitOf(out, 0, ""))
	if !strings.HasPrefix(failed, "claude: xxx") || !strings.HasSuffix(failed, "…") {
		t.Fatalf("judged %.80q", failed)
	}
}
