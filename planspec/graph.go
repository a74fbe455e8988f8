package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Steps side by side. A plan whose steps name what they need is a graph: each
// step's resolved needs are written in plan.steps (a step the plan wrote
// without needs waits for the step written before it; [] starts with the run),
// and stepQueue stays the original's flat list, in an order where every step
// comes after what it needs. The original runs that list as a straight line;
// stepseq runs the steps whose needs are met side by side. A plan without
// needs has no needs in its state, and runs as the straight line it always was.

// Graph is a step's place in a graph: what it needs, whether it is a foreach
// (and, for an instance of one, which item it runs), whether it runs in a
// worktree of its own.
type Graph struct {
	// Needs are the ids of the steps this one waits for: nil in a plan that
	// is a straight line. A foreach step named stands for all its instances.
	Needs []string
	// Foreach is the expression whose list expands the step into instances
	// ID[0], ID[1]… once its needs are met.
	Foreach string
	// ContinueOnFailure lets the steps that need this one go on when it fails
	// for good; the failure is listed in steps.ID.failed.
	ContinueOnFailure bool
	// Worktree runs each try of the step in a git worktree of its own, on a
	// branch of its own; Merge says how that branch joins the workspace's:
	// MergeAuto (at the join) or MergeNone (left for a pull request).
	Worktree bool
	Merge    string
	// Of is the foreach step an instance belongs to, "" for any other step;
	// Index is the instance's place in the list, Item its element.
	Of    string
	Index int
	Item  json.RawMessage
}

// How a worktree's branch joins the workspace's branch.
const (
	MergeAuto = "auto"
	MergeNone = "none"
)

// MergeWords are the values of merge.
var MergeWords = []Word{
	{MergeAuto, "merge each branch into the workspace's at the join, in plan order"},
	{MergeNone, "leave the branches for a person or a pull request"},
}

// MaxForeachItems bounds the instances one foreach expands into.
const MaxForeachItems = 1000

// Clone is a copy of g that shares nothing mutable with it.
func (g Graph) Clone() Graph {
	c := g
	if g.Needs != nil {
		c.Needs = slices.Clone(g.Needs)
	}
	c.Item = slices.Clone(g.Item)
	return c
}

// Equal reports whether g and o say the same.
func (g Graph) Equal(o Graph) bool {
	return slices.Equal(g.Needs, o.Needs) && (g.Needs == nil) == (o.Needs == nil) && g.Foreach == o.Foreach &&
		g.ContinueOnFailure == o.ContinueOnFailure && g.Worktree == o.Worktree && g.Merge == o.Merge &&
		g.Of == o.Of && g.Index == o.Index && bytes.Equal(g.Item, o.Item)
}

// set writes g's keys into a step's object.
func (g *Graph) set(o *object) {
	if g.Needs != nil {
		o.set("needs", g.Needs)
	} else {
		o.del("needs")
	}
	setOrDel(o, "foreach", g.Foreach, g.Foreach != "")
	setOrDel(o, "continueOnFailure", g.ContinueOnFailure, g.ContinueOnFailure)
	setOrDel(o, "worktree", g.Worktree, g.Worktree)
	setOrDel(o, "merge", g.Merge, g.Merge != "")
	setOrDel(o, "of", g.Of, g.Of != "")
	setOrDel(o, "index", g.Index, g.Of != "")
	if g.Of != "" && len(g.Item) > 0 {
		o.setRaw("item", g.Item)
	} else {
		o.del("item")
	}
}

// graph reads a step's graph keys.
func (d *stateDecoder) graph(o object, p string, g *Graph) {
	if r, ok := o.vals["needs"]; ok && !isNull(r) {
		g.Needs = nonNil(d.strList(p+"needs", r))
	}
	g.Foreach, _ = d.optStr(o, p, "foreach")
	g.ContinueOnFailure, _ = d.optBool(o, p, "continueOnFailure")
	g.Worktree, _ = d.optBool(o, p, "worktree")
	g.Merge = d.oneOf(o, p, "merge", MergeWords)
	g.Of, _ = d.optStr(o, p, "of")
	if n := d.optCount(o, p, "index"); n != nil {
		g.Index = *n
	}
	if r, ok := o.vals["item"]; ok && g.Of != "" {
		g.Item = compactJSON(r)
	}
}

// IsGraph reports whether the state's steps run side by side: its steps carry
// their needs. Every step of such a state does, so the first queued one tells.
func (s *State) IsGraph() bool {
	for _, id := range s.StepQueue {
		if sp := s.Steps[id]; sp != nil {
			return sp.Needs != nil
		}
	}
	return false
}

// InstanceID is the id of instance i of foreach step id: id[i].
func InstanceID(id string, i int) string { return id + "[" + strconv.Itoa(i) + "]" }

// SplitInstance is the foreach step and the index an instance id names; ok is
// false for an id that is not of the form ID[i].
func SplitInstance(id string) (of string, i int, ok bool) {
	open := strings.LastIndexByte(id, '[')
	if open <= 0 || !strings.HasSuffix(id, "]") {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[open+1 : len(id)-1])
	if err != nil || n < 0 || strconv.Itoa(n) != id[open+1:len(id)-1] {
		return "", 0, false
	}
	return id[:open], n, true
}

// BranchName is the git branch of a step instance's worktree in run:
// stepseq/RUN/STEP, an instance's index after a dash (git refuses brackets).
func BranchName(run, id string) string {
	if run == "" {
		run = "main"
	}
	if of, i, ok := SplitInstance(id); ok {
		id = fmt.Sprintf("%s-%d", of, i)
	}
	return "stepseq/" + run + "/" + id
}

// GraphIndex is what a pass over a graph asks of the state again and again,
// made once: where each queued step stands, and each foreach step's instances.
type GraphIndex struct {
	Pos       map[string]int      // queue index by id
	Instances map[string][]string // a foreach step's instances, in order
}

// Index makes the state's GraphIndex.
func (s *State) Index() *GraphIndex {
	x := &GraphIndex{Pos: make(map[string]int, len(s.StepQueue)), Instances: map[string][]string{}}
	for i, id := range s.StepQueue {
		x.Pos[id] = i
		if sp := s.Steps[id]; sp != nil && sp.Of != "" {
			x.Instances[sp.Of] = append(x.Instances[sp.Of], id)
		}
	}
	return x
}

// Expanded reports whether foreach step id has made its instances: it left
// the queue for them (an empty list made none).
func (x *GraphIndex) Expanded(s *State, id string) bool {
	sp := s.Steps[id]
	_, queued := x.Pos[id]
	return sp != nil && sp.Foreach != "" && !queued
}

// NeedsOf are the queued steps step id waits for: its needs, a foreach step
// that made its instances standing for them.
func (x *GraphIndex) NeedsOf(s *State, id string) []string {
	sp := s.Steps[id]
	if sp == nil {
		return nil
	}
	var out []string
	for _, n := range sp.Needs {
		if x.Expanded(s, n) {
			out = append(out, x.Instances[n]...)
			continue
		}
		out = append(out, n)
	}
	return out
}

// ForeachResults are the results of foreach step id's instances, in order: a
// JSON list, null where an instance has none.
func (x *GraphIndex) ForeachResults(s *State, id string) json.RawMessage {
	b := []byte{'['}
	for i, inst := range x.Instances[id] {
		if i > 0 {
			b = append(b, ',')
		}
		if r := s.StepRuns[inst]; r != nil && len(r.Result) > 0 {
			b = append(b, r.Result...)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, ']')
}

// ResultList is what steps.ID.results gives of a run whose result decoded to
// result: a foreach step's result is the list already; another step's is a
// list of one, or empty when it has none.
func ResultList(result any, r *StepRun) []any {
	if r != nil && r.Foreach {
		if l, ok := result.([]any); ok {
			return l
		}
	}
	if result == nil {
		return []any{}
	}
	return []any{result}
}
