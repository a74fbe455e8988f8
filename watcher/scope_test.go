package watcher

import (
	"slices"
	"testing"
)

func TestScope_Relevant(t *testing.T) {
	sc, err := newScope(
		[]string{"state.json", "./plans/", "out/report.md"},
		[]string{"src", "node_modules/pkg", "."},
	)
	if err != nil {
		t.Fatal(err)
	}
	root, err := newScope(nil, []string{""})
	if err != nil {
		t.Fatal(err)
	}
	named, err := newScope([]string{"state.json", "plans", "out/report.md"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := newScope([]string{".", ".stepseq/triggers"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		scope scope
		rel   string
		want  bool
	}{
		{named, "out", false},
		{named, "out/other.md", false},
		{named, "outside", false},
		{named, "plans/a/b.yaml", true},
		{named, "plans.bak", false},
		{named, "state.json", true},
		{sc, "state.json", true},
		{sc, "plans", true},
		{sc, "plans/a.yaml", true},
		{sc, "out/report.md", true},
		{sc, "src/a/b.go", true},
		{sc, "src/.git/HEAD", false},
		{sc, "src/web/node_modules/x.js", false},
		{sc, "node_modules/pkg/node_modules/dep/a.js", true},
		{sc, "node_modules/other/a.js", false},
		{sc, "", false},
		{root, "anything/at/all", true},
		{root, ".git/config", false},
		{root, ".gitignore", true},
		{entries, "state.r1.json", true},
		{entries, ".stepseq", true},
		{entries, ".stepseq/triggers/t1", true},
		{entries, ".stepseq/journal.jsonl", false},
		{entries, "out/report.md", false},
	}
	for _, tt := range tests {
		if got := tt.scope.relevant(tt.rel); got != tt.want {
			t.Errorf("relevant(%q) = %v, want %v", tt.rel, got, tt.want)
		}
	}
}

func TestScope_Clean(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "a/b/../c", want: "a/c"},
		{in: "./a/", want: "a"},
		{in: ".", want: ""},
		{in: "", want: ""},
		{in: "/abs", bad: true},
		{in: "..", bad: true},
		{in: "a/../../b", bad: true},
	}
	for _, tt := range tests {
		got, err := cleanRel(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("cleanRel(%q) = %q, %v", tt.in, got, err)
		}
	}
}

// TestScope_At: the paths at or below a directory, found without looking at
// the others.
func TestScope_At(t *testing.T) {
	sc, err := newScope([]string{"out", "out-x", "out/a.md", "out/sub/b.md", "outer/c", "z"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rel  string
		want []string
	}{
		{"out", []string{"out", "out/a.md", "out/sub/b.md"}},
		{"out/sub", []string{"out/sub/b.md"}},
		{"ou", nil},
		{"z", []string{"z"}},
		{"", sc.paths},
	}
	for _, tt := range tests {
		if got := sc.at(sc.paths, tt.rel); !slices.Equal(got, tt.want) {
			t.Errorf("at(%q) = %q, want %q", tt.rel, got, tt.want)
		}
	}
}

// A path isCleanRel accepts is one cleanRel leaves as it is, and one it refuses
// cleanRel changes or refuses: the fast path of cleanAll gives what the slow
// one would.
func TestIsCleanRel(t *testing.T) {
	for _, p := range []string{
		"", ".", "..", "a", "a/b", "a/b/", "/a", "a//b", "./a", "a/.", "a/./b", "a/..", "../a",
		"a/../b", ".stepseq/reports/s1", "...", "a/...b", "a.b/c..d", "//", "a/b/c.txt",
	} {
		c, err := cleanRel(p)
		if same := err == nil && c == p; isCleanRel(p) != same {
			t.Errorf("isCleanRel(%q) = %v; cleanRel gives %q, %v", p, isCleanRel(p), c, err)
		}
	}
	if got, err := cleanAll([]string{"b", "a/./c", "a/c"}); err != nil || !slices.Equal(got, []string{"a/c", "b"}) {
		t.Errorf("cleanAll of an unsorted list with a repeat: %v, %v", got, err)
	}
}

func FuzzIsCleanRel(f *testing.F) {
	for _, p := range []string{"", "a/b", "a//b", "./a", "a/..", "/a", "a/"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := cleanRel(p)
		if same := err == nil && c == p; isCleanRel(p) != same {
			t.Errorf("isCleanRel(%q) = %v; cleanRel gives %q, %v", p, isCleanRel(p), c, err)
		}
	})
}
