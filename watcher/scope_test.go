package watcher

import "testing"

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
	tests := []struct {
		scope scope
		rel   string
		want  bool
	}{
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
