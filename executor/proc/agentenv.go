package proc

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// MaxChanged is how many changed paths an agent is told of, in STEPSEQ_CHANGED
// and in place of {changed}.
const MaxChanged = 100

// ChangedPaths is the list an agent is told of: workspace paths with forward
// slashes, sorted, each once, at most MaxChanged. A path holding a line break
// cannot be one line of STEPSEQ_CHANGED and is left out.
func ChangedPaths(paths []string) []string {
	out := make([]string, 0, min(len(paths), MaxChanged))
	for _, p := range paths {
		p = filepath.ToSlash(p)
		if p == "" || strings.ContainsAny(p, "\n\r\x00") {
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return out[:min(len(out), MaxChanged)]
}

// agentVars are the variables stepseq sets for every agent; values inherited
// under these names are dropped, so that an agent never sees a stale one.
var agentVars = []string{"STEPSEQ_STEP", "STEPSEQ_TRY", "STEPSEQ_WORKSPACE", "STEPSEQ_STATE", "STEPSEQ_REPORTS", "STEPSEQ_RUN", "STEPSEQ_CHANGED"}

// withheldVars are the sidecar's own secrets, which no program it starts (an
// agent, a notify command) inherits: STEPSEQ_TOKEN is the listener's token, and
// a program holding it could act on the listener as its clients do.
var withheldVars = []string{"STEPSEQ_TOKEN"}

// InheritedEnv is what a program stepseq starts inherits of base (the
// sidecar's environment): all of it but the withheld secrets. It returns a new
// slice; base is left as it is.
func InheritedEnv(base []string) []string {
	return slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(withheldVars, name)
	})
}

// AgentEnv is an agent's environment: base (the sidecar's) and what it is told:
// its step and try, the workspace, the state file, its report folder, its
// run's name (main for state.json) and the paths whose change started this
// run, one per line (see ChangedPaths; empty when none).
func AgentEnv(base []string, step string, try int, ws store.Workspace, changed []string) []string {
	env := slices.DeleteFunc(InheritedEnv(base), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(agentVars, name)
	})
	return append(env,
		"STEPSEQ_STEP="+step,
		"STEPSEQ_TRY="+strconv.Itoa(try),
		"STEPSEQ_WORKSPACE="+ws.Dir,
		"STEPSEQ_STATE="+ws.State,
		"STEPSEQ_REPORTS="+ws.ReportsDir(step),
		"STEPSEQ_RUN="+ws.RunName(),
		"STEPSEQ_CHANGED="+strings.Join(ChangedPaths(changed), "\n"),
	)
}

// The values of a plan's `reports:` setting, as planspec reads them.
const (
	ReportsRequired = planspec.ReportsRequired
	ReportsOptional = planspec.ReportsOptional
)

// ReportHint is the two lines that end the prompt when the plan asks for reports
// (reports set to required or optional): how to report acceptance and the end of
// the work. It is empty when the plan does not ask.
func ReportHint(reports string) string {
	if reports != ReportsRequired && reports != ReportsOptional {
		return ""
	}
	last := "When finished, run: stepseq report done --summary \"<what you did>\" --evidence \"<the final artifact>\" --risk \"none\" --next none (or write those five fields as YAML to a file in $STEPSEQ_REPORTS)."
	if reports == ReportsRequired {
		last += " Without a done report the try fails."
	}
	return "When you start, run: stepseq report accepted --summary \"<what you will do>\" --evidence \"<your first action>\" --risk \"none|low|medium|high — why\" --next \"<what comes next>\".\n" + last
}

// WithReportHint ends prompt with ReportHint(reports), after a blank line.
func WithReportHint(prompt, reports string) string {
	hint := ReportHint(reports)
	if hint == "" {
		return prompt
	}
	return strings.TrimRight(prompt, "\n") + "\n\n" + hint
}
