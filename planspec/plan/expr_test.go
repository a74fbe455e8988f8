package plan

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

var (
	testNow        = time.Date(2026, 2, 10, 21, 30, 31, 0, time.UTC)
	testTryStarted = testNow.Add(-10 * time.Minute)
)

// workspace makes a workspace with files (a name ending in / is a directory),
// and a directory beside it, outside, with a secret in it. File times are fixed
// relative to testNow unless set by times.
func workspace(t testing.TB, files map[string]string, times map[string]time.Time) (root *os.Root, dir, outside string) {
	t.Helper()
	base := t.TempDir()
	dir, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.json"), []byte(`{"secret": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := testNow.Add(-time.Hour) // before the try started: not fresh
		if tm, ok := times[name]; ok {
			mt = tm
		}
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, dir, outside
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
}

func testEnv(root *os.Root, outside string) *Env {
	strp := func(s string) *string { return &s }
	return &Env{
		Root:       root,
		Now:        testNow,
		TryStarted: testTryStarted,
		Runs: map[string]*planspec.StepRun{
			"build": {Status: planspec.StatusDone, Tries: 2, LastRunIso: "2026-02-10T21:00:00.000000+00:00", Stdout: strp("ok")},
			"test":  {Status: planspec.StatusFailed, Tries: 1, Error: strp("boom")},
		},
		Step: "test",
		Vars: map[string]any{
			"topic": "solar", "pages": 12, "flag": "not a bool",
			"up": "../outside/secret.txt", "abs": filepath.Join(outside, "secret.txt"),
			"list": []any{"a", "b"},
		},
		Getenv: func(name string) string {
			return map[string]string{"STEPSEQ_APPROVE": "yes"}[name]
		},
	}
}

var conditionFiles = map[string]string{
	"a.txt":        "hello, world\n",
	"two.txt":      "one\ntwo",
	"empty.txt":    "",
	"dir/x.md":     "# x\n",
	"dir/sub/y.md": "# y\n",
	"dir/z.txt":    "z",
	"empty-dir/":   "",
	"data.json":    `{"ok": true, "count": 3, "items": ["a", "b"], "name": "n"}`,
	"bad.json":     "{not json",
	"old.txt":      "old",
	"new.txt":      "new",
}

var conditionTimes = map[string]time.Time{
	"old.txt": testNow.Add(-2 * time.Hour),
	"new.txt": testTryStarted.Add(time.Minute),
}

// TestCondition_Eval runs every function and variable of the condition language
// against a real workspace.
func TestCondition_Eval(t *testing.T) {
	root, dir, outside := workspace(t, conditionFiles, conditionTimes)
	symlink(t, "a.txt", filepath.Join(dir, "link-in"))
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(dir, "link-out"))
	symlink(t, "../outside/secret.txt", filepath.Join(dir, "link-up"))
	symlink(t, outside, filepath.Join(dir, "link-dir-out"))
	symlink(t, "nowhere", filepath.Join(dir, "dangling"))
	env := testEnv(root, outside)

	for _, tc := range []struct {
		src  string
		want bool
	}{
		// exists
		{`exists("a.txt")`, true},
		{`exists("dir")`, true},
		{`exists("dir/")`, true},
		{`exists("empty-dir")`, true},
		{`exists(".")`, true},
		{`exists("dir/../a.txt")`, true},
		{`exists("./a.txt")`, true},
		{`exists("missing")`, false},
		{`exists("dir/missing/deeper")`, false},
		{`exists("link-in")`, true},
		{`exists("link-out")`, false},
		{`exists("link-up")`, false},
		{`exists("link-dir-out")`, false},
		{`exists("link-dir-out/secret.txt")`, false},
		{`exists("dangling")`, false},
		{`exists(vars.up)`, false},  // computed paths are confined too
		{`exists(vars.abs)`, false}, // an absolute path is not looked up
		// size
		{`size("a.txt") == 13`, true},
		{`size("empty.txt") == 0`, true},
		{`size("missing") == 0`, true},
		{`size("dir") == 0`, true},
		{`size("link-in") == 13`, true},
		{`size("link-out") == 0`, true},
		{`size(vars.abs) == 0`, true},
		// lines
		{`lines("a.txt") == 1`, true},
		{`lines("two.txt") == 2`, true},
		{`lines("empty.txt") == 0`, true},
		{`lines("missing") == 0`, true},
		{`lines("dir") == 0`, true},
		{`lines("link-out") == 0`, true},
		// mtime and age
		{`mtime("old.txt") == now() - duration("2h")`, true},
		{`now() - mtime("old.txt") == duration("2h")`, true},
		{`mtime("missing").IsZero()`, true},
		{`mtime("link-out").IsZero()`, true},
		{`age("old.txt") == duration("2h")`, true},
		{`age("old.txt") > duration("1h")`, true},
		{`age("new.txt") < duration("10m")`, true},
		{`age("missing") > duration("100000h")`, true}, // never recent
		{`age("link-out") > duration("100000h")`, true},
		// fresh
		{`fresh("new.txt")`, true},
		{`fresh("old.txt")`, false},
		{`fresh("missing")`, false},
		{`fresh("link-out")`, false},
		// read
		{`read("a.txt") == "hello, world\n"`, true},
		{`read("a.txt") contains "world"`, true},
		{`read("missing") == ""`, true},
		{`read("dir") == ""`, true},
		{`read("link-out") == ""`, true},
		{`read("link-up") == ""`, true},
		{`read(vars.up) == ""`, true},
		// json
		{`json("data.json").ok == true`, true},
		{`json("data.json").count == 3`, true},
		{`json("data.json").count > 2.5`, true},
		{`len(json("data.json").items) == 2`, true},
		{`json("data.json").items[1] == "b"`, true},
		{`json("missing") == nil`, true},
		{`json("missing")?.ok ?? false`, false},
		{`json("link-out") == nil`, true},
		// glob
		{`join(glob("dir/**/*.md"), ",") == "dir/sub/y.md,dir/x.md"`, true},
		{`join(glob("*.txt"), ",") == "a.txt,empty.txt,new.txt,old.txt,two.txt"`, true},
		{`join(glob("link-*"), ",") == "link-in"`, true},
		{`len(glob("link-dir-out/*")) == 0`, true},
		{`len(glob("**/secret.txt")) == 0`, true},
		{`len(glob("nothing/**")) == 0`, true},
		{`"dir/x.md" in glob("dir/*")`, true},
		{`all(glob("dir/**/*.md"), size(#) > 0)`, true},
		{`len(glob("./dir/*.md")) == 1`, true},
		// env and now
		{`env("STEPSEQ_APPROVE") == "yes"`, true},
		{`env("UNSET") == ""`, true},
		{`now().Year() == 2026 && now().Unix() == 1770759031`, true},
		// steps, step, vars
		{`steps.build.status == "DONE" && steps.build.tries == 2 && steps.build.stdout == "ok"`, true},
		{`steps["build"].lastRunIso startsWith "2026-02-10"`, true},
		{`steps.build.error == "" && !steps.build.skipped`, true},
		{`steps.test.status == "FAILED"`, true},
		{`step.status == "FAILED" && step.tries == 1 && step.error == "boom"`, true},
		{`vars.topic == "solar" && vars.pages > 10`, true},
		{`"b" in vars.list`, true},
		// expr builtins still work
		{`upper(trim(read("a.txt"))) == "HELLO, WORLD"`, true},
		{`exists("a.txt") && size("a.txt") > 10`, true},
		{`exists("missing") || size("a.txt") > 100`, false},
	} {
		t.Run(tc.src, func(t *testing.T) {
			c, err := CompileCondition(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Eval(env)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCondition_SymlinkEscapes: a symlink inside the workspace that leads out
// reads as missing for every function, whether it names a file or a directory.
func TestCondition_SymlinkEscapes(t *testing.T) {
	root, dir, outside := workspace(t, map[string]string{"in/ok.txt": "ok"}, nil)
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(dir, "in", "file"))
	symlink(t, filepath.Join(outside, "secret.json"), filepath.Join(dir, "in", "data.json"))
	symlink(t, outside, filepath.Join(dir, "in", "dir"))
	symlink(t, "../..", filepath.Join(dir, "in", "up"))
	symlink(t, ".", filepath.Join(dir, "in", "loop"))
	env := &Env{Root: root, Now: testNow}
	for _, src := range []string{
		`!exists("in/file") && !exists("in/dir") && !exists("in/dir/secret.txt") && !exists("in/up/outside/secret.txt")`,
		`size("in/file") == 0 && size("in/dir/secret.txt") == 0`,
		`lines("in/file") == 0 && lines("in/up/outside/secret.txt") == 0`,
		`read("in/file") == "" && read("in/dir/secret.txt") == "" && read("in/up/outside/secret.txt") == ""`,
		`json("in/data.json") == nil && json("in/dir/secret.json") == nil`,
		`mtime("in/file").IsZero() && !fresh("in/file") && age("in/dir") > duration("1000h")`,
		`join(glob("in/*"), ",") == "in/loop,in/ok.txt"`,
		`len(glob("in/dir/*")) == 0 && len(glob("in/up/**")) == 0 && len(glob("**/secret.*")) == 0`,
		`join(glob("**/ok.txt"), ",") == "in/ok.txt"`, // the loop is not followed
	} {
		c, err := CompileCondition(src)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := c.Eval(env)
		if err != nil || !ok {
			t.Errorf("%s: got %v, %v; want true", src, ok, err)
		}
	}
}

func TestCondition_EvalErrors(t *testing.T) {
	big := strings.Repeat("x", MaxConditionRead+1)
	root, _, outside := workspace(t, map[string]string{"big.txt": big, "bad.json": "{not json", "data.json": `{"a": 1}`}, nil)
	env := testEnv(root, outside)
	for _, tc := range []struct {
		src, want string
		is        error
	}{
		{`read("big.txt") != ""`, "over the 1024 KiB limit", ErrConditionRead},
		{`json("big.txt") != nil`, "over the 1024 KiB limit", ErrConditionRead},
		{`json("bad.json") != nil`, "not JSON", ErrConditionRead},
		{`vars.flag`, `invalid operation: bool(string)`, nil},
		{`json("data.json").b.c == 1`, "cannot fetch c", nil},
		{`len(map(1..200000, # * 2)) > 0`, "memory budget exceeded", nil},
	} {
		c, err := CompileCondition(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		_, err = c.Eval(env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one containing %q", tc.src, err, tc.want)
		}
		var ce *ConditionError
		if !errors.As(err, &ce) || ce.Source != tc.src {
			t.Errorf("%s: want a *ConditionError naming the source, got %T", tc.src, err)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: errors.Is(%v) is false", tc.src, tc.is)
		}
	}

	c, _ := CompileCondition(`exists("a")`)
	if _, err := c.Eval(&Env{}); !errors.Is(err, ErrNoRoot) {
		t.Errorf("no root: got %v, want ErrNoRoot", err)
	}
	// expr reads a missing var as nil, and nil as false where a boolean is due.
	c, _ = CompileCondition(`vars.missing`)
	if ok, err := c.Eval(env); ok || err != nil {
		t.Errorf("vars.missing: got %v, %v; want false", ok, err)
	}
	c, _ = CompileCondition(`vars == nil && step.status == "PENDING" && len(steps) == 0`)
	if ok, err := c.Eval(nil); !ok || err != nil {
		t.Errorf("a nil env reads as an empty one: got %v, %v", ok, err)
	}
}

// TestCondition_GlobLimit: glob() lists at most maxGlobMatches paths, and its
// error names globCount; counting has no cap, whether written as globCount(P)
// or as len(glob(P)).
func TestCondition_GlobLimit(t *testing.T) {
	defer func(n int) { maxGlobMatches = n }(maxGlobMatches)
	maxGlobMatches = 20
	root, dir, _ := workspace(t, nil, nil)
	n := maxGlobMatches + 5
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.txt", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := CompileCondition(`glob("*.txt")[0] == "f00000.txt"`)
	_, err := c.Eval(&Env{Root: root})
	if !errors.Is(err, ErrConditionRead) || !strings.Contains(err.Error(), `globCount("*.txt")`) {
		t.Errorf("got %v, want ErrConditionRead naming globCount", err)
	}
	for _, src := range []string{
		fmt.Sprintf(`globCount("*.txt") == %d`, n),
		fmt.Sprintf(`len(glob("*.txt")) == %d`, n),
		fmt.Sprintf(`len(glob("f*")) >= %d && globCount("nothing/*") == 0`, n),
	} {
		c, err := CompileCondition(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if ok, err := c.Eval(&Env{Root: root}); !ok || err != nil {
			t.Errorf("%s: got %v, %v; want true", src, ok, err)
		}
	}
	c, _ = CompileCondition(`len(glob("inbox/*.txt")) > 0 || globCount("out/**") > 0`)
	if _, globs := c.Paths(); !slices.Equal(globs, []string{"inbox/*.txt", "out/**"}) {
		t.Errorf("Paths() globs = %q: globCount's pattern must be watched too", globs)
	}
}

func TestCompileCondition_Errors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{``, "empty condition"},
		{`exists("")`, "exists: empty path"},
		{`  `, "empty condition"},
		{`size("a")`, "gives int, want true or false"},
		{`read("a")`, "gives string, want true or false"},
		{`exist("a")`, `unknown name "exist": did you mean "exists"?`},
		{`stpes.a.status == "DONE"`, `did you mean "steps"?`},
		{`exists("../a")`, `exists: path "../a" leaves the workspace`},
		{`size("a/../../b") > 0`, `leaves the workspace`},
		{`read("/etc/passwd") != ""`, `read: absolute path "/etc/passwd"`},
		{`json("/etc/x.json") != nil`, `absolute path`},
		{`len(glob("../*")) > 0`, `glob "../*" leaves the workspace`},
		{`len(glob("/tmp/*")) > 0`, `absolute glob`},
		{`len(glob("[a")) > 0`, `bad glob`},
		{`exists("a") &&`, "unexpected token EOF"},
		{`exists(1)`, "cannot use int as argument (type string)"},
		{`step.bogus == 1`, "a step record has only status, tries, lastRunIso, error, stdout, skipped and result, not bogus"},
		{`exists("a") == "yes"`, "mismatched types bool and string"},
		{strings.Repeat("x", MaxConditionLen+1), "longer than 4096 bytes"},
		{"exists(\"\xff\")", "not valid UTF-8"},
		{strings.Repeat("1+", 1200) + "1 > 0", "exceeds maximum allowed nodes"},
	} {
		_, err := CompileCondition(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40q: got %v, want an error containing %q", tc.src, err, tc.want)
		}
		var ce *ConditionError
		if !errors.As(err, &ce) {
			t.Errorf("%.40q: want a *ConditionError, got %T", tc.src, err)
		}
	}
}

func TestCompileCondition_ErrorPosition(t *testing.T) {
	_, err := CompileCondition("exists(\"a\") &&\n  read(\"../b\") != \"\"")
	var ce *ConditionError
	if !errors.As(err, &ce) || ce.Line != 2 || ce.Column != 8 {
		t.Errorf("got %#v, want line 2 column 8", err)
	}
}

func TestCondition_Paths(t *testing.T) {
	c, err := CompileCondition(`exists("a") && size("b/c.txt") > 0 && len(glob("notes/**/*.md")) > 0 && exists("a") && exists(vars.x) && fresh("d" + ".txt") && step.status == "DONE"`)
	if err != nil {
		t.Fatal(err)
	}
	paths, globs := c.Paths()
	if got, want := strings.Join(paths, ","), "a,b/c.txt,d.txt"; got != want {
		t.Errorf("paths = %s, want %s", got, want)
	}
	if got, want := strings.Join(globs, ","), "notes/**/*.md"; got != want {
		t.Errorf("globs = %s, want %s", got, want)
	}
	paths[0] = "changed"
	if p, _ := c.Paths(); p[0] != "a" {
		t.Error("Paths returned the condition's own slice")
	}
	if c.Source() == "" || !strings.HasPrefix(c.Source(), `exists("a")`) {
		t.Errorf("Source = %q", c.Source())
	}
}

// PathsKnown is false only when a file function's path is built at run time:
// then Paths is not everything the condition may read.
func TestCondition_PathsKnown(t *testing.T) {
	for src, want := range map[string]bool{
		`exists("a") && size("b") > 0`:  true,
		`len(glob("notes/*.md")) > 0`:   true,
		`fresh("d" + ".txt")`:           true,
		`step.status == "DONE"`:         true,
		`exists("a") && exists(vars.x)`: false,
		`globCount(params.pattern) > 0`: false,
		`any(["a", "b"], {exists(#)})`:  false,
		`$env != nil`:                   false,
	} {
		c, err := CompileCondition(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := c.PathsKnown(); got != want {
			t.Errorf("%s: PathsKnown = %v, want %v", src, got, want)
		}
	}
}

func TestCompileCondition_Cached(t *testing.T) {
	a, err := CompileCondition(`exists("cached.txt")`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CompileCondition(`exists("cached.txt")`)
	if a != b {
		t.Error("the same source was compiled twice")
	}
}

// TestCondition_Concurrent evaluates one condition from many goroutines with
// different envs: pooled evaluations must not leak one env into another (run
// with -race).
func TestCondition_Concurrent(t *testing.T) {
	root, _, _ := workspace(t, map[string]string{"a.txt": "12345"}, nil)
	c, err := CompileCondition(`size("a.txt") == vars.n && step.tries == vars.n && steps[vars.id].tries == vars.n`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprintf("s%d", g)
				n := 5
				if i%2 == 1 {
					n = g + 100 // a size the file does not have: false
				}
				env := &Env{Root: root, Step: id, Vars: map[string]any{"n": n, "id": id},
					Runs: map[string]*planspec.StepRun{id: {Status: planspec.StatusDone, Tries: n}}}
				ok, err := c.Eval(env)
				if err != nil || ok != (n == 5) {
					t.Errorf("goroutine %d try %d: got %v, %v", g, i, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestCondition_EvalErrorHidesEnv: the error of an expression that reads env()
// is its source and the kind of failure, nothing it evaluated: not the value,
// nor the value converted, split and joined, upper- or lower-cased or sliced,
// nor expr's other words garbled by a mask ("in[env]id"). Its sentinel still
// matches, and nothing the evaluation saw can be unwrapped.
func TestCondition_EvalErrorHidesEnv(t *testing.T) {
	root, _, outside := workspace(t, map[string]string{"data.json": `{"a": 1}`,
		"big-hunter.json": strings.Repeat("x", MaxConditionRead+1)}, nil)
	vals := map[string]string{"S": "hunter2-9f8e7d", "V": "val", "F": "big-hunter.json", "N": "7"}
	for _, tc := range []struct{ src, kind string }{
		{`int(env("S")) > 0`, failConversion},
		{`int(join(split(env("S"), ""), "_")) > 0`, failConversion},
		{`int(upper(env("S"))) > 0`, failConversion},
		{`int(lower(env("S"))) > 0`, failConversion},
		{`int(env("S")[0:4]) > 0`, failConversion},
		{`float(env("S")[3:]) > 0`, failConversion},
		{`int(env("V")) > 0`, failConversion},
		{`int(env("N") + "-x") > 0`, failConversion},
		{`split(env("S"), "-")[5] == ""`, failIndex},
		{`json("data.json")[env("S")].b.c == 1`, failMember},
		{`json(env("F")) != nil`, failRead},
		{`env("N") == "7" && json("data.json").b.c == 1`, failMember},
		{`$env.env("S") != "" && int($env.env("S")) > 0`, failMember},
	} {
		env := testEnv(root, outside)
		env.Getenv = func(k string) string { return vals[k] }
		c, err := CompileCondition(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		_, err = c.Eval(env)
		want := fmt.Sprintf("condition %q: %s (the expression reads env(), so what it evaluated is not shown)", tc.src, tc.kind)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", tc.src, err, want)
			continue
		}
		if inner := errors.Unwrap(err); inner != nil && inner != ErrConditionRead {
			t.Errorf("%s: unwraps to %q", tc.src, inner)
		}
		if tc.kind == failRead && !errors.Is(err, ErrConditionRead) {
			t.Errorf("%s: want ErrConditionRead, got %v", tc.src, err)
		}
	}
	// An expression that does not read env() keeps expr's words and place.
	c, _ := CompileCondition(`int("val") > 0`)
	if _, err := c.Eval(testEnv(root, outside)); err == nil || !strings.Contains(err.Error(), "invalid operation: int(val)") {
		t.Errorf(`int("val"): got %v`, err)
	}
}

// envErrorExprs read env("S") and fail on some of its values, in every way an
// evaluation can: for FuzzCondition_EnvErrorHidesValue.
var envErrorExprs = []string{
	`int(env("S")) > 0`,
	`float(env("S")) > 0`,
	`int(join(split(env("S"), ""), "_")) > 0`,
	`int(upper(env("S"))) > 0`,
	`int(lower(trim(env("S")))) > 0`,
	`int(env("S")[1:]) > 0`,
	`int(replace(env("S"), "a", "b") + env("S")) > 0`,
	`split(env("S"), ",")[3] == ""`,
	`env("S")[2:1] == ""`,
	`json(env("S")) != nil`,
	`read(env("S")) != ""`,
	`json("data.json")[env("S")].x == 1`,
	`"x" matches env("S")`,
	`len(repeat(env("S"), 100000)) > 0`,
	`1 / len(env("S")) > 0`,
	`int($env.env("S")) > 0`,
}

// FuzzCondition_EnvErrorHidesValue: whatever env() gives, an expression that
// reads it fails, if it fails, with its source and a kind from the fixed list,
// and not a byte more.
func FuzzCondition_EnvErrorHidesValue(f *testing.F) {
	for i, v := range []string{"hunter2-9f8e7d", "val", "12", "", "a,b,c,d,e", "(", "data.json", "big.json", "1e400", "invalid"} {
		f.Add(v, uint8(i))
	}
	root, _, outside := workspace(f, map[string]string{"data.json": `{"a": 1}`, "big.json": strings.Repeat("x", MaxConditionRead+1)}, nil)
	f.Fuzz(func(t *testing.T, value string, which uint8) {
		src := envErrorExprs[int(which)%len(envErrorExprs)]
		c, err := CompileCondition(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		env := testEnv(root, outside)
		env.Getenv = func(string) string { return value }
		_, err = c.Eval(env)
		if err == nil {
			return
		}
		for _, kind := range failureKinds {
			if err.Error() == fmt.Sprintf("condition %q: %s%s", src, kind, envHidden) {
				return
			}
		}
		t.Fatalf("%s with %q: %v", src, value, err)
	})
}
