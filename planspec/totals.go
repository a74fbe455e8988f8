package planspec

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
)

// Running totals: a loop keeps only its last MaxRoundsKept rounds, so an
// aggregate over every round (a sum, a count, one field a round) is kept as
// it goes instead. Each finished round adds to its group's totals in the same
// state write that records the round, so a restart never counts a round
// twice, and the state stays the same size however many rounds run (a list
// total aside, which MaxTotalList bounds).

// Kinds of running total.
const (
	TotalSum   = "sum"   // the numbers the expression gives, added up
	TotalCount = "count" // the rounds in which the expression holds
	TotalList  = "list"  // the value the expression gives, one a round
)

// MaxTotalList bounds a list total: one value a round, at most this many.
// A loop that could run longer counts or sums instead.
const MaxTotalList = 100

// MaxTotalText bounds one string of a list total, in bytes: a list keeps one
// field a round (a path, a verdict), not a round's text.
const MaxTotalText = 200

// Total is a running total of a group: an expression of one of its kinds,
// evaluated against each finished round's records (each of the group's steps
// by id, as an element of rounds reads them).
type Total struct {
	Sum   string `json:"sum,omitempty"`
	Count string `json:"count,omitempty"`
	List  string `json:"list,omitempty"`
}

// Kind is the total's kind and its expression; "" when it has none, or more
// than one.
func (t Total) Kind() (kind, src string) {
	n := 0
	for _, k := range [...]struct{ kind, src string }{{TotalSum, t.Sum}, {TotalCount, t.Count}, {TotalList, t.List}} {
		if k.src != "" {
			kind, src = k.kind, k.src
			n++
		}
	}
	if n != 1 {
		return "", ""
	}
	return kind, src
}

// Zero is a total's value before any round has added to it.
func (t Total) Zero() any {
	switch kind, _ := t.Kind(); kind {
	case TotalCount:
		return 0
	case TotalList:
		return []any{}
	}
	return 0.0
}

var totalName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckTotalName refuses a name that totals.NAME could not read.
func CheckTotalName(name string) error {
	if !totalName.MatchString(name) {
		return fmt.Errorf("total %q: want a name of letters, digits and \"_\", not starting with a digit, like \"fixed\"; expressions read it as totals.NAME", Clip(name, 40))
	}
	return nil
}

// Totals are every group's running totals by name, as conditions, templates
// and the summary read them (totals.NAME): a loop that has not started gives
// its totals their zero. Nil when no group declares one.
func (s *State) Totals() map[string]any {
	var out map[string]any
	for i := range s.Settings.Groups {
		g := &s.Settings.Groups[i]
		if len(g.Totals) == 0 {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		var kept map[string]any
		if l := s.Settings.Loops[g.ID]; l != nil {
			kept = l.Totals
		}
		for name, t := range g.Totals {
			v, ok := kept[name]
			if !ok {
				v = t.Zero()
			}
			out[name] = totalValue(t, v)
		}
	}
	return out
}

// totalValue is a kept total as expressions see it: a count as a whole
// number, which state.json gives back as a float.
func totalValue(t Total, v any) any {
	if kind, _ := t.Kind(); kind == TotalCount {
		if f, ok := v.(float64); ok && f == math.Trunc(f) {
			return int(f)
		}
	}
	return v
}

func cloneTotals(ts map[string]any) map[string]any {
	if ts == nil {
		return nil
	}
	out := maps.Clone(ts)
	for k, v := range out {
		if list, ok := v.([]any); ok {
			out[k] = slices.Clone(list)
		}
	}
	return out
}

// checkTotals refuses the totals of group g (at key) the machine could not
// keep: each has one kind and a name that totals.NAME reads, given by one
// group only (seen: name → the group that gives it).
func (d *stateDecoder) checkTotals(key string, g *Group, seen map[string]string) {
	for _, name := range slices.Sorted(maps.Keys(g.Totals)) {
		f := key + ".totals." + name
		if err := CheckTotalName(name); err != nil {
			d.fail(f, "%v", err)
		}
		if other, dup := seen[name]; dup {
			d.fail(f, "total %q is group %q's already: a total's name is the plan's, read as totals.%s", name, other, name)
		}
		seen[name] = g.ID
		if kind, _ := g.Totals[name].Kind(); kind == "" {
			d.fail(f, "want one of sum, count or list, with its expression, like {sum: \"respond.result.fixed_count\"}")
		}
	}
}
