package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	"github.com/stepseq/stepseq/watcher"
)

func newLogsCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		ws      workspaceFlags
		try     int
		earlier int
		follow  bool
	)
	cmd := &cobra.Command{
		Use:   "logs STEP [DIR]",
		Short: "Print a try's output: the latest try of STEP, or --try N",
		Long: `logs prints the full output of one try of STEP, as the agent wrote it to
DIR/.stepseq/logs/<step>/<try>.log (default DIR .): the latest try unless --try.
Tries are those of the step's latest run: a re-run (an on: change, a trigger)
counts from 1 again, and the earlier run's logs are kept beside as
earlier-<UTC time>-<try>.log. --earlier N prints a try of the Nth run before the
latest (1: the one just before), its latest try unless --try. Runs count by their
tries: a try that printed nothing left no log, and is said to have printed nothing.
A retry is no new run: its try goes on counting, and --try shows the ones before.

-f follows a try that is running: it prints what the agent writes as it writes it,
and ends when the try ends. A try that has not started yet is waited for.

Exit status: 0 when the log was printed, or the try printed nothing (said on stderr);
1 when the step is not in the plan or the try never ran; 2 on a usage error.`,
		Example: `  stepseq logs build
  stepseq logs build ./workspace --try 2
  stepseq logs build -f            # follow the running try until it ends
  stepseq logs build --earlier 1   # the run before an on: change ran it again`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: stepCompletion(&ws),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, state := ws.statePath(args[1:])
			wsp, err := store.NewWorkspace(state)
			if err != nil {
				return err
			}
			if try < 0 || (cmd.Flags().Changed("try") && try == 0) {
				return usageErr("--try %d: tries count from 1", try)
			}
			if earlier < 0 || (cmd.Flags().Changed("earlier") && earlier == 0) {
				return usageErr("--earlier %d: earlier runs count from 1, the run before the latest", earlier)
			}
			l := &logReader{ws: wsp, step: args[0], try: try, out: stdout, stderr: stderr}
			if earlier > 0 {
				if follow {
					return usageErr("--earlier and -f: an earlier run is over, there is nothing to follow")
				}
				return l.printEarlier(earlier)
			}
			return l.run(cmd.Context(), follow)
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	ws.addRunFlag(cmd, false)
	cmd.Flags().IntVar(&try, "try", 0, "the try to print (default the latest)")
	cmd.Flags().IntVar(&earlier, "earlier", 0, "print a try of the Nth run before the latest (1: the one just before)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing while the try runs; end when it ends")
	return cmd
}

// logReader prints one try's log of one step.
type logReader struct {
	ws     store.Workspace
	step   string
	try    int // 0: the latest
	out    io.Writer
	stderr io.Writer

	offset int64  // bytes of the log printed so far
	output int64  // of which the agent wrote (not stepseq's header and footer)
	path   string // the log printed; "" for try's log of the latest run
}

// readLog reads the log printed past what was printed.
func (l *logReader) readLog() (store.LogPart, error) {
	if l.path != "" {
		return l.ws.ReadLogFile(nil, l.path, fmt.Sprintf("step %s's earlier log %s", l.step, filepath.Base(l.path)), l.offset, math.MaxInt64)
	}
	return l.ws.ReadLog(nil, l.step, l.try, l.offset, math.MaxInt64)
}

// logPath is the log printed.
func (l *logReader) logPath() string {
	if l.path != "" {
		return l.path
	}
	return l.ws.LogPath(l.step, l.try)
}

// earlierRuns are the runs of the step set aside when it ran again from try 1,
// newest first: each its time stamp and the tries it logged, by number.
func (l *logReader) earlierRuns() []earlierRun {
	entries, _ := os.ReadDir(filepath.Dir(l.ws.LogPath(l.step, 1)))
	var runs []earlierRun
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "earlier-")
		rest, log := strings.CutSuffix(rest, ".log")
		i := strings.LastIndexByte(rest, '-')
		if !ok || !log || i < 0 || !e.Type().IsRegular() {
			continue
		}
		try, err := strconv.Atoi(rest[i+1:])
		if err != nil || try < 1 {
			continue
		}
		stamp := rest[:i]
		if n := len(runs); n == 0 || runs[n-1].stamp != stamp {
			runs = append(runs, earlierRun{stamp: stamp, tries: map[int]string{}})
		}
		r := &runs[len(runs)-1]
		r.tries[try] = filepath.Join(filepath.Dir(l.ws.LogPath(l.step, 1)), e.Name())
		r.last = max(r.last, try)
	}
	slices.Reverse(runs) // ReadDir sorts by name: the stamps sort by time
	return runs
}

type earlierRun struct {
	stamp string
	tries map[int]string // try → its log
	last  int            // its last try: tries 1 to last ran, those without a log printed nothing
}

// printEarlier prints a try of the nth run before the latest: its latest try
// unless --try.
func (l *logReader) printEarlier(n int) error {
	runs := l.earlierRuns()
	if n > len(runs) {
		if len(runs) == 0 {
			return &exitError{code: 1, err: fmt.Errorf("step %s has no earlier run%s: a run is set aside when the step runs again from try 1 (an on: change, a trigger)", l.step, l.earlierTriesHint())}
		}
		return &exitError{code: 1, err: fmt.Errorf("step %s has %s: there is no earlier run %d", l.step, plural(len(runs), "earlier run"), n)}
	}
	r := runs[n-1]
	if l.try == 0 {
		l.try = r.last
	}
	path, ok := r.tries[l.try]
	switch {
	case !ok && l.try <= r.last:
		// The try ran and printed nothing: it left no log.
		fmt.Fprintf(l.stderr, "step %s earlier run %d try %d printed nothing\n", l.step, n, l.try)
		return nil
	case !ok:
		return &exitError{code: 1, err: fmt.Errorf("step %s's earlier run %d (set aside %s) ran tries 1 to %d: there is no try %d", l.step, n, r.stamp, r.last, l.try)}
	}
	l.path = path
	m, err := l.copyNew()
	if err == nil && (m == 0 || l.output == 0) {
		fmt.Fprintf(l.stderr, "step %s earlier run %d try %d printed nothing\n", l.step, n, l.try)
	}
	return err
}

// earlierTriesHint points a user who meant an earlier try of the latest run,
// when it has more than one, at --try: "" otherwise.
func (l *logReader) earlierTriesHint() string {
	st := l.readState()
	if st == nil || st.StepRuns[l.step] == nil || st.StepRuns[l.step].Tries < 2 {
		return ""
	}
	tries := st.StepRuns[l.step].Tries
	run := ""
	if name := l.ws.RunName(); name != store.MainRun {
		run = " --run " + name
	}
	return fmt.Sprintf(" (its tries 1 to %d are all its latest run's: stepseq logs %s%s --try %d prints the one before the last)", tries, l.step, run, tries-1)
}

// readState reads the workspace's state; nil when there is none or it does not parse.
func (l *logReader) readState() *planspec.State {
	st, err := (&store.StateFile{Path: l.ws.State}).Read()
	if err != nil {
		return nil
	}
	return st
}

// latestLogged is the highest try with a log file, 0 when none.
func (l *logReader) latestLogged() int {
	entries, _ := os.ReadDir(filepath.Dir(l.ws.LogPath(l.step, 1)))
	latest := 0
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") {
			latest = max(latest, n)
		}
	}
	return latest
}

func (l *logReader) run(ctx context.Context, follow bool) error {
	st := l.readState()
	tries, known := 0, st == nil
	if st != nil {
		if _, ok := st.Steps[l.step]; ok {
			known = true
		}
		if run := st.StepRuns[l.step]; run != nil {
			tries = run.Tries
		}
	}
	logged := l.latestLogged()
	if !known && logged == 0 {
		return &exitError{code: 1, err: core.NoStep(st, l.step)}
	}
	if l.try == 0 {
		l.try = max(tries, logged)
		if l.try == 0 {
			if !follow {
				return &exitError{code: 1, err: fmt.Errorf("step %s has not run yet: no tries, no logs", l.step)}
			}
			l.try = 1 // wait for the first
		}
	}
	if !follow && l.try > max(tries, logged) {
		return &exitError{code: 1, err: fmt.Errorf("step %s has run %s: there is no try %d", l.step, plural(max(tries, logged), "time"), l.try)}
	}
	if !follow {
		n, err := l.copyNew()
		if errors.Is(err, fs.ErrNotExist) || (err == nil && (n == 0 || l.output == 0)) {
			fmt.Fprintf(l.stderr, "step %s try %d printed nothing\n", l.step, l.try)
			return nil
		}
		return err
	}
	return l.follow(ctx)
}

// copyNew prints what the log holds past what was printed. A log that shrank was
// cut or rewritten: it is printed again from its start.
func (l *logReader) copyNew() (int64, error) {
	p, err := l.readLog()
	if errors.Is(err, store.ErrNotRegular) {
		return 0, fmt.Errorf("%s is not a log file", l.logPath())
	}
	if err != nil {
		return 0, err
	}
	n, err := l.out.Write(p.Data)
	l.offset = p.Start + int64(n)
	l.output += agentBytes(p.Data[:n])
	return int64(n), err
}

// agentBytes counts what the agent wrote, leaving out stepseq's header, footer and
// cut markers (lines starting "=== ").
func agentBytes(b []byte) int64 {
	var n int64
	for line := range bytes.Lines(b) {
		if !bytes.HasPrefix(line, []byte("=== ")) {
			n += int64(len(line))
		}
	}
	return n
}

// tryState says how far the try followed is, as the state records it: started,
// and over once its run is no longer IN_PROGRESS at that try or moved on to a
// later one. Without a state there is no telling: the try is taken as running.
func (l *logReader) tryState() (started, over bool) {
	st := l.readState()
	if st == nil {
		return true, false
	}
	run := st.StepRuns[l.step]
	if run == nil {
		return false, false
	}
	switch {
	case run.Tries > l.try:
		return true, true
	case run.Tries == l.try:
		return true, run.Status != planspec.StatusInProgress
	}
	return false, false
}

// follow prints the log as it grows until the try is over. It watches the log
// and the state file, the log's folders made or not, so that a try not yet
// started can be waited for; it never polls.
func (l *logReader) follow(ctx context.Context) error {
	if err := requireFolders(l.ws.Dir); err != nil {
		return err
	}
	logRel, err := filepath.Rel(l.ws.Dir, l.ws.LogPath(l.step, l.try))
	if err != nil {
		return fmt.Errorf("watch the log: %w", err)
	}
	cfg := watcher.Config{Root: l.ws.Dir, Paths: []string{filepath.ToSlash(logRel), filepath.Base(l.ws.State)}, Settle: time.Millisecond}
	// Each call prints what is new and says whether the try is over. The state
	// is read before the log, so that the last output is printed after the try
	// ended. A log there before its try started is an older run's, about to be
	// replaced.
	err = watcher.Follow(ctx, cfg, func(*watcher.Batch) (time.Duration, bool, error) {
		started, over := l.tryState()
		if !started {
			return 0, false, nil
		}
		if _, err := l.copyNew(); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, true, err
		}
		return 0, over, nil
	})
	if ctx.Err() != nil && err == nil {
		return nil
	}
	return l.ended(err)
}

// ended closes a follow: a try that printed nothing says so.
func (l *logReader) ended(err error) error {
	if err == nil && l.output == 0 {
		fmt.Fprintf(l.stderr, "step %s try %d printed nothing\n", l.step, l.try)
	}
	return err
}

// stepCompletion completes a STEP argument with the steps of the workspace's
// plan, read from the state file the DIR argument or --state names.
func stepCompletion(ws *workspaceFlags) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			_, state := ws.statePath(nil)
			st, err := (&store.StateFile{Path: state}).Read()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			out := make([]cobra.Completion, 0, len(st.StepQueue))
			for _, id := range st.StepQueue {
				title := ""
				if s := st.Steps[id]; s != nil {
					title = s.Title
				}
				out = append(out, cobra.CompletionWithDesc(id, title))
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		case 1:
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

func newHistoryCmd(stdout io.Writer) *cobra.Command {
	var (
		ws     workspaceFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "history [DIR]",
		Short: "List past runs: the states archived under DIR/.stepseq/history/",
		Long: `history lists the runs of DIR (default .) that are over: each state that a new plan
replaced was archived under DIR/.stepseq/history/, and shows here with its plan, when
it was archived, its status and how many of its steps were done. The run in
DIR/state.json is not history yet: stepseq status shows it.

Exit status: 0, also when there is no history; 2 on a usage error.`,
		Example: `  stepseq history
  stepseq history ./workspace --json`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: dirCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			_, state := ws.statePath(args)
			wsp, err := store.NewWorkspace(state)
			if err != nil {
				return err
			}
			runs, err := engine.History(wsp)
			if err != nil {
				return err
			}
			if asJSON {
				if runs == nil {
					runs = []engine.HistoryRun{}
				}
				return writeJSON(stdout, runs)
			}
			if len(runs) == 0 {
				_, err := fmt.Fprintf(stdout, "no past runs in %s: a run is archived there when a new plan replaces it\n", wsp.HistoryDir())
				return err
			}
			rows := [][]string{{"PLAN", "ARCHIVED", "STATUS", "STEPS DONE", "FILE"}}
			for _, r := range runs {
				when, status, steps := "-", r.Status, fmt.Sprintf("%d/%d", r.StepsDone, r.Steps)
				if t, err := planspec.ParseISO(r.Archived); err == nil && r.Archived != "" {
					when = t.Local().Format("2006-01-02 15:04:05")
				}
				if r.Error != "" {
					status, steps = "unreadable: "+clip(r.Error, 50), "-"
				}
				rows = append(rows, []string{r.Plan, when, status, steps, shownRel(r.File)})
			}
			var b bytes.Buffer
			writeTable(&b, rows, -1, false)
			_, err = stdout.Write(b.Bytes())
			return err
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// shownRel is path relative to the working directory when it lies under it.
func shownRel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return path
}
