package engine

import (
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// WatchSet derives what the sidecar watches from the plan: the state file, the
// plans folder, the trigger queue, the required outputs, the paths and glob roots
// named in conditions and `on`. Only a glob with ** asks for a whole tree. Paths are
// slash-separated and relative to the workspace.
func WatchSet(ws store.Workspace, plansDir string, st *planspec.State, conds *Conditions) (paths, trees []string) {
	rel := func(p string) string {
		r, err := filepath.Rel(ws.Dir, p)
		if err != nil {
			return p
		}
		return filepath.ToSlash(r)
	}
	paths = []string{rel(ws.State), rel(plansDir), rel(ws.TriggersDir())}
	addGlob := func(g string) {
		base, pattern := doublestar.SplitPattern(g)
		if strings.Contains(pattern, "/") || strings.Contains(pattern, "**") {
			trees = append(trees, base) // the pattern spans directories below base
			return
		}
		paths = append(paths, base) // one level: base's entries are enough
	}
	if st != nil {
		for _, id := range st.StepQueue {
			spec := st.Steps[id]
			if spec == nil {
				continue
			}
			for _, o := range spec.RequiredOutputs {
				if spec.Foreach == "" || !planspec.HasTemplate(o) {
					paths = append(paths, o) // a foreach's template is its instances' to watch
				}
			}
			for _, g := range spec.On {
				addGlob(g)
			}
		}
	}
	if conds != nil {
		c := conds.Compiled()
		for _, m := range []map[string]*planpkg.Condition{c.When, c.Skip, c.Check} {
			for _, cond := range m {
				p, g := cond.Paths()
				paths = append(paths, p...)
				for _, pattern := range g {
					addGlob(pattern)
				}
			}
		}
	}
	clean := func(list []string) []string {
		out := list[:0]
		for _, p := range list {
			p = path.Clean(p)
			if p == ".." || strings.HasPrefix(p, "../") || path.IsAbs(p) {
				continue // outside the workspace: conditions read it as missing anyway
			}
			out = append(out, p)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return clean(paths), clean(trees)
}
