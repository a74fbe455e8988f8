package plan

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
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/expr-lang/expr/vm"
	"github.com/stepseq/stepseq/planspec"
)

// evaluation is the environment a condition runs in: the functions and variables
// of the condition language, bound to one Env. Its exported fields are what expr
// sees (named by their expr tags); it is also the type conditions are checked
// against. Evaluations are pooled, so one Eval allocates nothing of its own.
type evaluation struct {
	Exists func(string) bool              `expr:"exists"`
	Glob   func(string) ([]string, error) `expr:"glob"`
	Count  func(string) int               `expr:"globCount"`
	Size   func(string) int               `expr:"size"`
	Lines  func(string) int               `expr:"lines"`
	Mtime  func(string) time.Time         `expr:"mtime"`
	Age    func(string) time.Duration     `expr:"age"`
	Fresh  func(string) bool              `expr:"fresh"`
	Read   func(string) (string, error)   `expr:"read"`
	JSON   func(string) (any, error)      `expr:"json"`
	Getenv func(string) string            `expr:"env"`
	Now    func() time.Time               `expr:"now"`
	Steps  map[string]planspec.RunView    `expr:"steps"`
	Step   planspec.RunView               `expr:"step"`
	Vars   map[string]any                 `expr:"vars"`
	Params map[string]any                 `expr:"params"`
	// Round, Rounds and Result are the round of the step's loop,
	// its finished rounds, and the step's own result (for exit and abort).
	Round  int                           `expr:"round"`
	Rounds []map[string]planspec.RunView `expr:"rounds"`
	Result any                           `expr:"result"`
	// Totals are the loops' running totals by name.
	Totals map[string]any `expr:"totals"`
	// Item and Index are a foreach instance's element and its place.
	Item  any `expr:"item"`
	Index int `expr:"index"`

	env   *Env
	stats []statEntry // what this evaluation already asked the file system
	vm    vm.VM
}

func viewOf(r *planspec.StepRun) planspec.RunView {
	if r == nil {
		return planspec.RunView{Status: planspec.StatusPending}
	}
	v := planspec.RunView{Status: r.Status, Tries: r.Tries, LastRunIso: r.LastRunIso, Skipped: r.Skipped}
	if r.Error != nil {
		v.Error = *r.Error
	}
	if r.Stdout != nil {
		v.Stdout = *r.Stdout
	}
	if len(r.Result) > 0 {
		_ = json.Unmarshal(r.Result, &v.Result) // valid JSON: it passed its schema
	}
	v.Results, v.Failed = planspec.ResultList(v.Result, r), r.Failed
	if v.Failed == nil {
		v.Failed = []string{}
	}
	return v
}

type statEntry struct {
	path string
	info fs.FileInfo // nil when missing
}

var evaluations = sync.Pool{New: func() any {
	ev := &evaluation{Steps: map[string]planspec.RunView{}}
	ev.Exists, ev.Glob, ev.Count, ev.Size, ev.Lines = ev.exists, ev.glob, ev.globCount, ev.size, ev.lines
	ev.Mtime, ev.Age, ev.Fresh = ev.mtime, ev.age, ev.fresh
	ev.Read, ev.JSON, ev.Getenv, ev.Now = ev.read, ev.json, ev.getenv, ev.now
	ev.vm.MemoryBudget = conditionMemoryBudget
	return ev
}}

func getEvaluation(c *Condition, env *Env) *evaluation {
	ev := evaluations.Get().(*evaluation)
	ev.env = env
	ev.Vars, ev.Params = env.Vars, env.Params
	switch {
	case c.usesSteps && c.stepsNamed:
		// Only the records the expression names: a condition of a 10,000-step
		// plan reads one or two.
		for _, id := range c.steps {
			if r, ok := env.Runs[id]; ok {
				ev.Steps[id] = viewOf(r)
			}
		}
	case c.usesSteps:
		for id, r := range env.Runs {
			ev.Steps[id] = viewOf(r)
		}
	}
	if c.usesStep {
		ev.Step = viewOf(env.Runs[env.Step])
		ev.Result = ev.Step.Result
	}
	ev.Item, ev.Index, ev.Totals = env.Item, env.Index, env.Totals
	if env.Loop != nil {
		ev.Round = env.Loop.Round
		if c.usesRounds {
			ev.Rounds = planspec.RoundViews(env.Loop)
		}
	}
	return ev
}

func putEvaluation(ev *evaluation) {
	ev.env, ev.Vars, ev.Params, ev.Step = nil, nil, nil, planspec.RunView{}
	ev.Round, ev.Rounds, ev.Result, ev.Totals = 0, nil, nil, nil
	ev.Item, ev.Index = nil, 0
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
	if name, ok := planspec.FSPath(p); ok {
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
	name, _ := planspec.FSPath(p)
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
// into symlinked directories, and leaves out symlinks that lead outside. The
// list is capped, which bounds memory; globCount counts past the cap.
func (ev *evaluation) glob(pattern string) ([]string, error) {
	if planspec.CheckGlob(pattern) != nil {
		return []string{}, nil
	}
	pattern = path.Clean(pattern)
	matches := []string{}
	err := ev.walkGlob(pattern, func(p string) error {
		if len(matches) == maxGlobMatches {
			return errTooManyMatches
		}
		matches = append(matches, p)
		return nil
	})
	if errors.Is(err, errTooManyMatches) {
		return nil, fmt.Errorf("%w: glob(%q): more than %d matches; globCount(%q) counts them without listing", ErrConditionRead, pattern, maxGlobMatches, pattern)
	}
	slices.Sort(matches)
	return matches, nil
}

// globCount is len(glob(pattern)) without the list: it counts every match, in
// memory that does not grow with them. A condition's len(glob(P)) is compiled to
// globCount(P).
func (ev *evaluation) globCount(pattern string) int {
	if planspec.CheckGlob(pattern) != nil {
		return 0
	}
	n := 0
	_ = ev.walkGlob(path.Clean(pattern), func(string) error {
		n++
		return nil
	})
	return n
}

// walkGlob calls fn with each workspace path matching pattern, in no particular
// order, until fn fails. Symlinks that lead outside are left out.
func (ev *evaluation) walkGlob(pattern string, fn func(p string) error) error {
	root := ev.env.Root
	keep := func(p string, d fs.DirEntry) error {
		if d.Type()&fs.ModeSymlink != 0 {
			if _, err := root.Stat(p); err != nil {
				return nil
			}
		}
		return fn(p)
	}
	if dir, name, ok := oneLevel(pattern); ok {
		return listMatching(root, dir, name, keep)
	}
	return doublestar.GlobWalk(root.FS(), pattern, keep, doublestar.WithNoFollow())
}

// oneLevel splits a pattern whose wildcards all sit in its last element, such
// as "inbox/*.txt", into the directory and the element's pattern.
func oneLevel(pattern string) (dir, name string, ok bool) {
	dir, name = doublestar.SplitPattern(pattern)
	if strings.Contains(name, "/") || strings.Contains(name, "**") || !strings.ContainsAny(name, "*?[{") {
		return "", "", false
	}
	return dir, name, true
}

// listMatching calls fn with each entry of dir whose name matches, reading the
// directory a chunk at a time: a folder of 100k files costs no list of them.
func listMatching(root *os.Root, dir, name string, fn func(string, fs.DirEntry) error) error {
	f, err := openDirTyped(root, dir)
	if err != nil {
		return nil // missing or unreadable: no matches, as GlobWalk has it
	}
	defer f.Close()
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			if ok, _ := doublestar.Match(name, e.Name()); !ok {
				continue
			}
			p := e.Name()
			if dir != "." {
				p = dir + "/" + p
			}
			if err := fn(p, e); err != nil {
				return err
			}
		}
		if err != nil {
			return nil // io.EOF, or the directory went away while being read
		}
	}
}
