package planspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/expr-lang/expr/vm"
)

// evaluation is the environment a condition runs in: the functions and variables
// of the condition language, bound to one Env. Its exported fields are what expr
// sees (named by their expr tags); it is also the type conditions are checked
// against. Evaluations are pooled, so one Eval allocates nothing of its own.
type evaluation struct {
	Exists func(string) bool              `expr:"exists"`
	Glob   func(string) ([]string, error) `expr:"glob"`
	Size   func(string) int               `expr:"size"`
	Lines  func(string) int               `expr:"lines"`
	Mtime  func(string) time.Time         `expr:"mtime"`
	Age    func(string) time.Duration     `expr:"age"`
	Fresh  func(string) bool              `expr:"fresh"`
	Read   func(string) (string, error)   `expr:"read"`
	JSON   func(string) (any, error)      `expr:"json"`
	Getenv func(string) string            `expr:"env"`
	Now    func() time.Time               `expr:"now"`
	Steps  map[string]runView             `expr:"steps"`
	Step   runView                        `expr:"step"`
	Vars   map[string]any                 `expr:"vars"`

	env   *Env
	stats []statEntry // what this evaluation already asked the file system
	vm    vm.VM
}

// runView is a step's run record as a condition sees it.
type runView struct {
	Status     string `expr:"status"`
	Tries      int    `expr:"tries"`
	LastRunIso string `expr:"lastRunIso"`
	Error      string `expr:"error"`
	Stdout     string `expr:"stdout"`
	Skipped    bool   `expr:"skipped"`
	Result     any    `expr:"result"` // the accepted result of the last done report; nil when none
}

func viewOf(r *StepRun) runView {
	if r == nil {
		return runView{Status: StatusPending}
	}
	v := runView{Status: r.Status, Tries: r.Tries, LastRunIso: r.LastRunIso, Skipped: r.Skipped}
	if r.Error != nil {
		v.Error = *r.Error
	}
	if r.Stdout != nil {
		v.Stdout = *r.Stdout
	}
	if len(r.Result) > 0 {
		_ = json.Unmarshal(r.Result, &v.Result) // valid JSON: it passed its schema
	}
	return v
}

type statEntry struct {
	path string
	info fs.FileInfo // nil when missing
}

var evaluations = sync.Pool{New: func() any {
	ev := &evaluation{Steps: map[string]runView{}}
	ev.Exists, ev.Glob, ev.Size, ev.Lines = ev.exists, ev.glob, ev.size, ev.lines
	ev.Mtime, ev.Age, ev.Fresh = ev.mtime, ev.age, ev.fresh
	ev.Read, ev.JSON, ev.Getenv, ev.Now = ev.read, ev.json, ev.getenv, ev.now
	ev.vm.MemoryBudget = conditionMemoryBudget
	return ev
}}

func getEvaluation(c *Condition, env *Env) *evaluation {
	ev := evaluations.Get().(*evaluation)
	ev.env = env
	ev.Vars = env.Vars
	if c.usesSteps {
		for id, r := range env.Runs {
			ev.Steps[id] = viewOf(r)
		}
	}
	if c.usesStep {
		ev.Step = viewOf(env.Runs[env.Step])
	}
	return ev
}

func putEvaluation(ev *evaluation) {
	ev.env, ev.Vars, ev.Step = nil, nil, runView{}
	clear(ev.Steps)
	clear(ev.stats)
	ev.stats = ev.stats[:0]
	evaluations.Put(ev)
}

// stat looks p up inside the workspace, once per evaluation: exists("a") && size("a")
// costs one system call and sees one state of the file. Paths that are not local,
// symlinks leading out and unreadable entries are missing (nil).
func (ev *evaluation) stat(p string) fs.FileInfo {
	for _, e := range ev.stats {
		if e.path == p {
			return e.info
		}
	}
	var info fs.FileInfo
	if name, ok := fsPath(p); ok {
		if fi, err := ev.env.Root.Stat(name); err == nil {
			info = fi
		}
	}
	if len(ev.stats) < 32 {
		ev.stats = append(ev.stats, statEntry{p, info})
	}
	return info
}

func (ev *evaluation) exists(p string) bool { return ev.stat(p) != nil }

func (ev *evaluation) size(p string) int {
	fi := ev.stat(p)
	if fi == nil || !fi.Mode().IsRegular() {
		return 0
	}
	return int(fi.Size())
}

func (ev *evaluation) mtime(p string) time.Time {
	if fi := ev.stat(p); fi != nil {
		return fi.ModTime()
	}
	return time.Time{}
}

// age of a missing file is the longest duration there is: a file that is not there
// is never "recent", so skip: age("cache.json") < duration("1h") reruns the step.
func (ev *evaluation) age(p string) time.Duration {
	fi := ev.stat(p)
	if fi == nil {
		return time.Duration(math.MaxInt64)
	}
	return ev.now().Sub(fi.ModTime())
}

func (ev *evaluation) fresh(p string) bool {
	fi := ev.stat(p)
	return fi != nil && !fi.ModTime().Before(ev.env.TryStarted)
}

func (ev *evaluation) now() time.Time {
	if ev.env.Now.IsZero() {
		return time.Now()
	}
	return ev.env.Now
}

func (ev *evaluation) getenv(name string) string {
	if ev.env.Getenv == nil {
		return os.Getenv(name)
	}
	return ev.env.Getenv(name)
}

// open opens a regular file inside the workspace, or reports it missing.
func (ev *evaluation) open(p string) (*os.File, fs.FileInfo) {
	fi := ev.stat(p)
	if fi == nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	name, _ := fsPath(p)
	f, err := ev.env.Root.Open(name)
	if err != nil {
		return nil, nil
	}
	return f, fi
}

func (ev *evaluation) lines(p string) int {
	f, _ := ev.open(p)
	if f == nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, 32<<10)
	n, last := 0, byte('\n')
	for {
		k, err := f.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err != nil {
			break
		}
	}
	if last != '\n' {
		n++ // a last line without a newline is a line
	}
	return n
}

// load reads a whole file for read() and json(), refusing one over the cap.
func (ev *evaluation) load(fn, p string) ([]byte, bool, error) {
	f, fi := ev.open(p)
	if f == nil {
		return nil, false, nil
	}
	defer f.Close()
	if fi.Size() > MaxConditionRead {
		return nil, true, fmt.Errorf("%w: %s(%q): %d bytes, over the %d KiB limit", ErrConditionRead, fn, p, fi.Size(), MaxConditionRead>>10)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxConditionRead+1))
	switch {
	case err != nil:
		return nil, false, nil // unreadable reads as missing, as it does for stat
	case len(data) > MaxConditionRead:
		return nil, true, fmt.Errorf("%w: %s(%q): grew over the %d KiB limit", ErrConditionRead, fn, p, MaxConditionRead>>10)
	}
	return data, true, nil
}

func (ev *evaluation) read(p string) (string, error) {
	data, _, err := ev.load("read", p)
	return string(data), err
}

// json parses a JSON file: objects are maps, numbers float64; a missing file is nil
// (json("x")?.ok tests for it), a file that is not JSON is an error.
func (ev *evaluation) json(p string) (any, error) {
	data, ok, err := ev.load("json", p)
	if err != nil || !ok {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%w: json(%q): not JSON: %v", ErrConditionRead, p, err)
	}
	return v, nil
}

var errTooManyMatches = errors.New("too many matches")

// maxGlobMatches is MaxGlobMatches; tests lower it.
var maxGlobMatches = MaxGlobMatches

// glob lists the workspace paths matching pattern, sorted. It does not descend
// into symlinked directories, and leaves out symlinks that lead outside.
func (ev *evaluation) glob(pattern string) ([]string, error) {
	if checkGlob(pattern) != nil {
		return []string{}, nil
	}
	pattern = path.Clean(pattern)
	root := ev.env.Root
	matches := []string{}
	err := doublestar.GlobWalk(root.FS(), pattern, func(p string, d fs.DirEntry) error {
		if d.Type()&fs.ModeSymlink != 0 {
			if _, err := root.Stat(p); err != nil {
				return nil
			}
		}
		if len(matches) == maxGlobMatches {
			return errTooManyMatches
		}
		matches = append(matches, p)
		return nil
	}, doublestar.WithNoFollow())
	if errors.Is(err, errTooManyMatches) {
		return nil, fmt.Errorf("%w: glob(%q): more than %d matches", ErrConditionRead, pattern, maxGlobMatches)
	}
	slices.Sort(matches)
	return matches, nil
}
