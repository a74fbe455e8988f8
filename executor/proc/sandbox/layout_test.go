package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tree makes the files named (a trailing / makes a folder) under a new folder.
func tree(t testing.TB, names ...string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := filepath.Join(root, n)
		if strings.HasSuffix(n, "/") {
			err = os.MkdirAll(p, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestPlan_Order: no mount hides one made before it at or under its path, and of
// two at one path the one that must win comes last, whatever order the Spec
// names them in: a write path inside a read path stays writable, and the target of
// a protected link inside a writable folder stays read-only.
func TestPlan_Order(t *testing.T) {
	ws := tree(t, "src/plans/p.yaml", "state.json", "README.md")
	if err := os.Symlink("src/plans", filepath.Join(ws, "plans")); err != nil {
		t.Fatal(err)
	}
	data := tree(t, "out/")
	l, err := plan(Spec{Workspace: ws, ReportDir: filepath.Join(ws, ".stepseq/reports/s1"),
		Write: []string{filepath.Join(data, "out")}, Read: []string{data}})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range l.mounts {
		for _, b := range l.mounts[i+1:] {
			if _, ok := under(a.path, b.path); ok && (a.path != b.path || a.rank > b.rank) {
				t.Errorf("%v is made after %v, and hides it", b.args(), a.args())
			}
		}
	}
	index := func(r rank, p string) int {
		i := slices.Index(l.mounts, mount{rank: r, path: p})
		if i < 0 {
			t.Fatalf("no %v in %v", mount{rank: r, path: p}.args(), l.mounts)
		}
		return i
	}
	for _, order := range [][2]int{
		{index(hide, "/tmp"), index(show, ws)},
		{index(show, ws), index(write, filepath.Join(ws, "src"))},
		{index(write, filepath.Join(ws, "src")), index(guard, filepath.Join(ws, "src/plans"))},
		{index(guard, filepath.Join(ws, ".stepseq")), index(write, filepath.Join(ws, ".stepseq/reports/s1"))},
		{index(show, data), index(write, filepath.Join(data, "out"))},
	} {
		if order[0] > order[1] {
			t.Errorf("%v comes after %v", l.mounts[order[0]].args(), l.mounts[order[1]].args())
		}
	}
	for _, p := range []string{"state.json", ".stepseq", "plans"} {
		if slices.Contains(l.mounts, mount{rank: write, path: filepath.Join(ws, p)}) {
			t.Errorf("%s is writable", p)
		}
	}
}

// TestPlan_Refuses: what would make a protected path writable, and paths that are
// not what they must be, are refused with what is wrong.
func TestPlan_Refuses(t *testing.T) {
	ws := tree(t, "src/", "README.md", "plans/p.yaml")
	for _, c := range []struct {
		name string
		spec Spec
		want string
	}{
		{"write the workspace", Spec{Write: []string{"."}}, "holds " + ws},
		{"write above the workspace", Spec{Write: []string{filepath.Dir(ws)}}, "holds " + ws},
		{"write in plans", Spec{Write: []string{"plans/generated"}}, "is protected"},
		{"write in .stepseq", Spec{Write: []string{filepath.Join(ws, ".stepseq/x")}}, "is protected"},
		{"preset in git's hooks", Spec{PresetDirs: []string{".git/hooks"}}, "is protected"},
		{"report folder above the workspace", Spec{ReportDir: filepath.Dir(ws)}, "holds " + ws},
		{"protected above", Spec{Protected: []string{"../x"}}, "not a path inside"},
		{"protected absolute", Spec{Protected: []string{"/etc"}}, "not a path inside"},
		{"protected bad pattern", Spec{Protected: []string{"a/["}}, "syntax error"},
		{"relative workspace", Spec{Workspace: "ws"}, `workspace "ws": not an absolute path`},
		{"worktree a file", Spec{Worktree: filepath.Join(ws, "README.md")}, "not a folder"},
		{"read missing", Spec{Read: []string{"missing"}}, "read path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.spec.Workspace == "" {
				c.spec.Workspace = ws
			}
			_, err := plan(c.spec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(ws, "plans/generated")); err == nil {
				t.Fatal("a refused write path was made")
			}
		})
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("PATH", "/bin")
	t.Setenv("STEPSEQ_SANDBOX_GIVEN", "g")
	t.Setenv("STEPSEQ_SANDBOX_OTHER", "o")
	env, err := environment(Spec{Env: []string{"STEPSEQ_SANDBOX_GIVEN", "STEPSEQ_SANDBOX_UNSET"},
		BaseEnv: []string{"STEPSEQ_STEP=s1", "PATH=/usr/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PATH=/usr/bin", "STEPSEQ_SANDBOX_GIVEN=g", "TMPDIR=/tmp", "STEPSEQ_STEP=s1"} {
		if !slices.Contains(env, want) {
			t.Errorf("want %s in %v", want, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "STEPSEQ_SANDBOX_OTHER=") || strings.HasPrefix(kv, "STEPSEQ_SANDBOX_UNSET=") || kv == "PATH=/bin" {
			t.Errorf("%s in %v", kv, env)
		}
	}
	if env, _ := environment(Spec{BaseEnv: []string{"TMPDIR=/tmp/mine"}}); !slices.Contains(env, "TMPDIR=/tmp/mine") {
		t.Errorf("stepseq's TMPDIR is not kept: %v", env)
	}
	for _, bad := range []Spec{{Env: []string{"A=B"}}, {Env: []string{""}}, {BaseEnv: []string{"NOVALUE"}}} {
		if _, err := environment(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
