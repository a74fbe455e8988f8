package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stepseq/stepseq/executor"
	"github.com/stepseq/stepseq/planspec"
)

// invalidStateGrace is how long --follow waits for a state file that does not parse
// to become valid before it says so: a writer may be midway through it.
const invalidStateGrace = 200 * time.Millisecond

func newStatusCmd(g *globals, stdout io.Writer) *cobra.Command {
	var (
		ws     workspaceFlags
		asJSON bool
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "status [DIR]",
		Short: "Show the plan's steps, tries, durations, blockers and what it waits for",
		Long: "status reads DIR/state.json (default .) and prints every step with its status, tries, last run, " +
			"duration and error, the blockers, and what the current step waits for. It changes nothing. " +
			"--follow prints again on every change of the state file, until the plan is DONE.",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: dirCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, state := ws.statePath(args)
			rt, err := executor.NewRuntime(state, g.logger())
			if err != nil {
				return err
			}
			defer rt.Close()
			v := &statusView{rt: rt, state: state, plans: filepath.Join(dir, "plans"), out: stdout, json: asJSON, follow: follow,
				tty: isTerminal(stdout), log: g.logger().With("component", "status")}
			v.color = v.tty && os.Getenv("NO_COLOR") == ""
			if !follow {
				return v.once()
			}
			return v.followChanges(cmd.Context(), invalidStateGrace)
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object (with --follow: one per line)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print again on every change of the state file; exit 0 once the plan is DONE")
	return cmd
}

// dirCompletion completes a DIR argument with directories.
func dirCompletion(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// statusView prints reports of one workspace.
type statusView struct {
	rt     *executor.Runtime
	state  string // the state file as the command line names it, for messages
	plans  string // the plans folder a sidecar would read
	out    io.Writer
	json   bool
	follow bool
	tty    bool
	color  bool
	log    *slog.Logger

	shown   [32]byte // hash of the state content last printed
	printed int
}

// errNoState is the answer to a workspace without a state file.
func (v *statusView) errNoState() error {
	plans := v.plans
	if !strings.ContainsRune(plans, filepath.Separator) {
		plans = "." + string(filepath.Separator) + plans
	}
	return &exitError{code: 1, err: fmt.Errorf("no %s in %s: apply a plan (stepseq apply) or drop one in %s",
		filepath.Base(v.state), filepath.Dir(v.state), plans)}
}

func (v *statusView) once() error {
	data, st, err := v.load()
	if errors.Is(err, fs.ErrNotExist) {
		return v.errNoState()
	}
	if err != nil {
		return err
	}
	_, err = v.print(data, st)
	return err
}

// load reads and parses the state file, keeping its bytes to tell changes apart.
func (v *statusView) load() ([]byte, *planspec.State, error) {
	f, err := os.Open(v.rt.WS.State)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, planspec.MaxStateSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", v.rt.WS.State, err)
	}
	st, err := planspec.ParseState(bytes.NewReader(data), v.rt.WS.State)
	return data, st, err
}

// print writes one report. A state whose conditions do not compile is still
// shown; the error is returned after it.
func (v *statusView) print(data []byte, st *planspec.State) (done bool, err error) {
	maxRetries, err := executor.MaxRetriesFromEnv(v.rt.Getenv)
	if err != nil {
		return false, err
	}
	now := v.rt.Now()
	done = st.Status == planspec.StatusDone
	// st is read once per report and given up here: no copy of it is parsed.
	r, condErr := executor.DescribeOwned(v.rt, st, now, maxRetries)
	var b bytes.Buffer
	if v.json {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if !v.follow {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(r); err != nil {
			return false, err
		}
	} else {
		if v.printed > 0 {
			if v.tty {
				b.WriteString("\x1b[H\x1b[2J") // a terminal shows the latest report alone
			} else {
				b.WriteString("\n")
			}
		}
		writeText(&b, r, now, v.color)
	}
	// One write per report: a reader of a pipe never sees half of one.
	if _, err := v.out.Write(b.Bytes()); err != nil {
		return false, err
	}
	v.shown = sha256.Sum256(data)
	v.printed++
	return done, condErr
}

// followChanges prints the report, then again on every change of the state file,
// until the plan is DONE or ctx ends. It watches the state file's directory, not
// the file: the file is replaced by rename, which a watch on it would not survive.
// A state that does not parse may be a write in progress: it is reported only when
// no valid content follows within settle.
func (v *statusView) followChanges(ctx context.Context, settle time.Duration) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", v.rt.WS.State, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(v.rt.WS.State)); err != nil {
		return fmt.Errorf("watch %s: %w", filepath.Dir(v.rt.WS.State), err)
	}
	// Read after the watch is set, so no change between the two goes unseen.
	data, st, err := v.load()
	if errors.Is(err, fs.ErrNotExist) {
		return v.errNoState()
	}
	if err != nil {
		return err
	}
	if done, err := v.print(data, st); err != nil || done {
		return err
	}

	invalid := time.NewTimer(time.Hour)
	invalid.Stop()
	var pending error // the last read did not parse
	gone := false
	update := func() (bool, error) {
		data, st, err := v.load()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			invalid.Stop()
			pending = nil
			if !gone {
				gone = true
				v.log.Warn("the state file was removed; waiting for a new one", "state", v.rt.WS.State)
			}
			return false, nil
		case err != nil:
			pending = err
			invalid.Reset(settle)
			return false, nil
		}
		invalid.Stop()
		pending, gone = nil, false
		if sha256.Sum256(data) == v.shown {
			return false, nil
		}
		done, err := v.print(data, st)
		if errors.Is(err, planspec.ErrInvalidState) {
			v.log.Warn("the state file has invalid conditions", "err", err)
			return done, nil // shown; a later edit may fix it
		}
		return done, err
	}
	base := filepath.Base(v.rt.WS.State)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file watcher stopped")
			}
			if filepath.Base(ev.Name) != base {
				continue
			}
			if done, err := update(); err != nil || done {
				return err
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file watcher stopped")
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				v.log.Warn("file watcher", "err", err)
			}
			if done, err := update(); err != nil || done {
				return err
			}
		case <-invalid.C:
			if pending != nil {
				v.log.Warn("the state file is not valid; showing the last valid one", "err", pending)
				pending = nil
			}
		}
	}
}

// writeText writes the report as a table for people; times are shown relative
// to now, the time the report was made.
func writeText(b *bytes.Buffer, r executor.Report, now time.Time, color bool) {
	name := r.Plan
	if name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(b, "plan %s: %s", name, paint(r.Status, color))
	switch n := len(r.Steps); {
	case r.Status == planspec.StatusDone:
		fmt.Fprintf(b, ", %d steps\n", n)
	case r.Cursor < n:
		fmt.Fprintf(b, ", step %d of %d (%s)\n", r.Cursor+1, n, r.Steps[r.Cursor].ID)
	default:
		fmt.Fprintf(b, ", all %d steps passed\n", n)
	}
	b.WriteString("\n")

	rows := [][]string{{"STEP", "TITLE", "STATUS", "TRIES", "LAST RUN", "DURATION", "ERROR"}}
	for _, s := range r.Steps {
		lastRun := "-"
		if s.LastRunIso != nil {
			lastRun = *s.LastRunIso
			if t, err := planspec.ParseISO(*s.LastRunIso); err == nil {
				lastRun = executor.ClockTime(t, now)
			}
		}
		duration := "-"
		if s.DurationMs != nil {
			duration = shortDuration(time.Duration(*s.DurationMs) * time.Millisecond)
			if s.Running {
				duration = "running " + duration
			}
		}
		status := s.Status
		if s.Skipped {
			status += " (skipped)"
		}
		errText := ""
		if s.Error != nil {
			errText = firstLine(*s.Error, 60)
		}
		rows = append(rows, []string{s.ID, clip(s.Title, 40), status, fmt.Sprint(s.Tries), lastRun, duration, errText})
	}
	writeTable(b, rows, 2, color)

	if len(r.Blockers) > 0 {
		b.WriteString("\nblockers:\n")
		for _, bl := range r.Blockers {
			fmt.Fprintf(b, "  %s\n", bl)
		}
	}
	b.WriteString("\n")
	switch {
	case r.WaitingFor.Action == executor.Idle.String():
		fmt.Fprintf(b, "now: %s\n", r.WaitingFor.Reason)
	case r.WaitingFor.Step != "":
		fmt.Fprintf(b, "now: %s: %s\n", r.WaitingFor.Step, r.WaitingFor.Reason)
	default:
		fmt.Fprintf(b, "now: %s\n", r.WaitingFor.Reason)
	}
	if len(r.WaitingFor.MissingOutputs) > 0 {
		fmt.Fprintf(b, "missing outputs: %s\n", strings.Join(r.WaitingFor.MissingOutputs, ", "))
	}
}

// writeTable pads columns to their widest cell, measured without colour, and
// colours the cells of column col.
func writeTable(b *bytes.Buffer, rows [][]string, col int, color bool) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for r, row := range rows {
		var line strings.Builder
		for i, cell := range row {
			text := cell
			if r > 0 && i == col {
				text = paint(cell, color)
			}
			line.WriteString(text)
			if i < len(row)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
}

// paint colours the status word at the start of s.
func paint(s string, color bool) string {
	if !color {
		return s
	}
	word, rest, _ := strings.Cut(s, " ")
	code := map[string]string{
		planspec.StatusDone:       "32",
		planspec.StatusFailed:     "31",
		planspec.StatusInProgress: "33",
	}[word]
	if code == "" {
		return s
	}
	if rest != "" {
		rest = " " + rest
	}
	return "\x1b[" + code + "m" + word + "\x1b[0m" + rest
}

// shortDuration rounds d for reading: 850ms, 12s, 3m4s, 1h2m.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	s := strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// firstLine is the first line of s, cut to n characters.
func firstLine(s string, n int) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return clip(strings.TrimSpace(line), n)
}

// clip cuts s to n characters, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	return err == nil
}
