package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/engine"
	"github.com/stepseq/stepseq/executor/notify"
	"github.com/stepseq/stepseq/executor/proc"
	"github.com/stepseq/stepseq/executor/store"
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
		Long: `status reads DIR/state.json (default .) and prints every step with its status, tries,
last run, duration and error, the blockers, what the current step waits for, and the
plans in DIR/plans that were rejected, with their first errors. It changes nothing.
With runs beside state.json (state.NAME.json) the report is followed by a list of
them; --run NAME reports on one instead.

A step that is due but whose agent cannot start (STEP_AGENT_CMD unset, or naming a
program that is not on PATH) is shown as unable to launch, with the cause.

--follow keeps the report on screen: on a terminal it is redrawn in place, with the
running step's duration ticking once a second; on a pipe each change appends a new
report. It waits for a state file that does not exist yet, and ends when the plan is
DONE (exit 0) or when interrupted (exit 1 if the plan is blocked then, else 0). A
blocked plan is followed on: stepseq retry, approve or budget, from another terminal,
moves it again, and the report shows the step running again.

Exit status: 0 when the plan runs or is DONE; 1 when it is blocked (a step out of
retries), when there is no state file or it is not valid; 2 on a usage error.

Environment: STEP_AGENT_CMD and STEP_MAX_RETRIES, as the sidecar reads them, decide
what status says the next pass would do. NO_COLOR turns colour off.`,
		Example: `  stepseq status
  stepseq status ./workspace --json | jq .waitingFor
  stepseq status -f                  # live until DONE, through retries
  stepseq status --state other/state.json`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: dirCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, state := ws.statePath(args)
			rt, err := engine.NewRuntime(state, g.logger())
			if err != nil {
				return err
			}
			defer rt.Close()
			v := &statusView{rt: rt, state: state, plans: filepath.Join(dir, "plans"), out: stdout, json: asJSON, follow: follow, allRuns: ws.state == "" && ws.run == "",
				tty: isTerminal(stdout), width: terminalWidth(stdout), tick: time.Second, log: g.logger().With("component", "status")}
			v.color = v.tty && os.Getenv("NO_COLOR") == ""
			if !follow {
				return v.once()
			}
			return v.followChanges(cmd.Context(), invalidStateGrace)
		},
	}
	cmd.Flags().StringVar(&ws.state, "state", "", "state file (default DIR/state.json)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object (with --follow: one per line)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep showing the report as the state changes, a blocked plan's retry too; exit 0 once DONE, 1 when interrupted while blocked")
	ws.addRunFlag(cmd, false)
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
	rt     *engine.Runtime
	state  string // the state file as the command line names it, for messages
	plans  string // the plans folder a sidecar would read
	out    io.Writer
	json   bool
	follow bool
	tty    bool
	width  int // the terminal's columns; 0 when unknown
	color  bool
	tick   time.Duration // how often --follow redraws a running step's duration
	log    *slog.Logger

	shown   [32]byte // with follow: hash of the state content last printed
	printed int
	rows    int // terminal rows the last text report took, to redraw over it
	// rejectedShown is the list of rejected plans last printed, to tell news.
	rejectedShown string
	// noteShown is the ID of the newest notification printed.
	noteShown string
	// allRuns: the report of state.json is followed by the other runs, listed.
	allRuns bool
}

// otherRuns lists the workspace's runs other than its own, when the view
// shows them.
func (v *statusView) otherRuns() []store.RunInfo {
	if !v.allRuns {
		return nil
	}
	runs, _ := store.ListRuns(v.rt.WS.ForRun(store.MainRun))
	return slices.DeleteFunc(runs, func(r store.RunInfo) bool { return r.Name == store.MainRun })
}

// writeOtherRuns lists the other runs after the report of state.json.
func writeOtherRuns(b *bytes.Buffer, runs []store.RunInfo) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(b, "\nother runs: %d (stepseq status --run NAME shows one)\n", len(runs))
	writeRunsTable(b, runs)
}

// statusJSON is `status --json`: the report, the plans the sidecar rejected and
// the last notifications, oldest first.
type statusJSON struct {
	engine.StatusReport
	RejectedPlans []engine.PlanListing `json:"rejectedPlans"`
	Notifications []notify.Notice      `json:"notifications"`
	// Runs are the workspace's other runs, when status shows the
	// workspace's own and there are others.
	Runs []store.RunInfo `json:"runs,omitempty"`
}

// notesShown is how many of the last notifications a report shows.
const notesShown = 5

// errBlocked ends status with exit 1 when the plan is blocked: the report said why.
var errBlocked = &exitError{code: 1}

// errNoState is the answer to a workspace without a state file.
func (v *statusView) errNoState() error {
	plans := v.plans
	if !strings.ContainsRune(plans, filepath.Separator) {
		plans = "." + string(filepath.Separator) + plans
	}
	msg := fmt.Sprintf("no %s in %s: apply a plan (stepseq apply) or drop one in %s",
		filepath.Base(v.state), filepath.Dir(v.state), plans)
	all, _ := engine.ListPlans(v.rt.WS, v.plans, nil)
	for _, p := range all {
		switch p.Status {
		case engine.PlanRejected:
			msg += fmt.Sprintf("\n%s was rejected with %s: stepseq validate %s", p.File, plural(p.ErrorCount, "error"), filepath.Join(v.plans, filepath.Base(p.File)))
		case engine.PlanQueued, engine.PlanNew:
			msg += fmt.Sprintf("\n%s is queued: a sidecar (stepseq watch) applies it as a new run", p.File)
		}
	}
	return &exitError{code: 1, err: errors.New(msg)}
}

func (v *statusView) once() error {
	data, st, err := v.load()
	if errors.Is(err, fs.ErrNotExist) {
		if runs := v.otherRuns(); len(runs) > 0 {
			// No state.json, but runs beside it: they are the workspace's.
			if v.json {
				return writeJSON(v.out, statusJSON{Runs: runs, RejectedPlans: []engine.PlanListing{}, Notifications: []notify.Notice{}})
			}
			var b bytes.Buffer
			fmt.Fprintf(&b, "no state.json in %s; other runs: %d (stepseq status --run NAME shows one)\n", filepath.Dir(v.state), len(runs))
			writeRunsTable(&b, runs)
			_, err := v.out.Write(b.Bytes())
			return err
		}
		return v.errNoState()
	}
	if err != nil {
		return err
	}
	r, err := v.print(data, st, v.rt.Now())
	if err != nil {
		return err
	}
	if blocked(r) {
		return errBlocked
	}
	return nil
}

// blocked reports whether the plan waits on a person (a step out of retries,
// a budget reached): the run is blocked, as runs and the page say.
func blocked(r engine.StatusReport) bool { return r.Run == core.RunBlocked }

// running reports whether a step's agent runs, so that its duration grows.
func running(r engine.StatusReport) bool {
	for _, s := range r.Steps {
		if s.Running {
			return true
		}
	}
	return false
}

// load reads and parses the state file, keeping its bytes to tell changes apart.
func (v *statusView) load() ([]byte, *planspec.State, error) {
	data, err := (&store.StateFile{Path: v.rt.WS.State}).Bytes()
	if err != nil {
		return nil, nil, err
	}
	parse := planspec.ReadStateBytes // print gives st up: it is never written
	if v.follow {
		parse = planspec.ParseStateBytes // a tick copies it, by its encoding
	}
	st, err := parse(data, v.rt.WS.State)
	return data, st, err
}

// rejected lists the plans in the plans folder that are not valid.
func (v *statusView) rejected(st *planspec.State) []engine.PlanListing {
	all, err := engine.ListPlans(v.rt.WS, v.plans, st)
	if err != nil {
		v.log.Warn("cannot list the plans", "dir", v.plans, "err", err)
	}
	out := []engine.PlanListing{}
	for _, p := range all {
		// A rejected edit of the active plan is listed active, with its errors:
		// status names it as list does.
		if p.Status == engine.PlanRejected || len(p.Errors) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// print writes one report as of now. A state whose conditions do not compile is
// still shown; the error is returned after it.
func (v *statusView) print(data []byte, st *planspec.State, now time.Time) (engine.StatusReport, error) {
	maxRetries, err := proc.MaxRetriesFromEnv(v.rt.Getenv)
	if err != nil {
		return engine.StatusReport{}, err
	}
	rejected := v.rejected(st)
	v.rejectedShown = fmt.Sprint(rejected)
	notes := v.notes()
	describe := engine.DescribeOwned // st is read once and given up here: no copy is parsed
	if v.follow {
		describe = engine.Describe // a tick draws the same state again
	}
	r, condErr := describe(v.rt, st, now, maxRetries)
	runs := v.otherRuns()
	var b bytes.Buffer
	if v.json {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if !v.follow {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(statusJSON{StatusReport: r, RejectedPlans: rejected, Notifications: notes, Runs: runs}); err != nil {
			return r, err
		}
	} else {
		if v.printed > 0 {
			if v.tty && v.rows > 0 {
				// Over the last report, in place: up to its first row, then clear below.
				fmt.Fprintf(&b, "\x1b[%dF\x1b[J", v.rows)
			} else {
				b.WriteString("\n")
			}
		}
		start := b.Len()
		b.Grow(80 * len(r.Steps)) // a line a step, about: not a doubling at every few hundred
		writeText(&b, r, now, v.color)
		writeRejected(&b, rejected)
		writeOtherRuns(&b, runs)
		writeNotes(&b, notes, now)
		if v.tty { // only a terminal's report is drawn over
			v.rows = screenRows(string(b.Bytes()[start:]), v.width)
		}
	}
	// One write per report: a reader of a pipe never sees half of one.
	if _, err := v.out.Write(b.Bytes()); err != nil {
		return r, err
	}
	if v.follow { // to tell a change from a rewrite of the same content
		v.shown = sha256.Sum256(data)
	}
	v.printed++
	return r, condErr
}

// notes are the last notifications of the workspace, oldest first; none when the
// feed cannot be read. The newest is remembered as shown.
func (v *statusView) notes() []notify.Notice {
	notes, err := notify.Recent(v.rt.WS.Dir, notesShown)
	if err != nil {
		v.log.Warn("cannot read the notifications", "err", err)
	}
	if notes == nil {
		notes = []notify.Notice{}
	}
	if len(notes) > 0 {
		v.noteShown = notes[len(notes)-1].ID
	}
	return notes
}

// writeNotes lists the last notifications, newest last.
func writeNotes(b *bytes.Buffer, notes []notify.Notice, now time.Time) {
	if len(notes) == 0 {
		return
	}
	b.WriteString("\nnotifications:\n")
	for _, n := range notes {
		writeNote(b, n, now)
	}
}

// writeNote is one notification on one line.
func writeNote(b *bytes.Buffer, n notify.Notice, now time.Time) {
	where := "plan"
	switch {
	case n.Step != "" && n.Try > 0:
		where = fmt.Sprintf("%s try %d", n.Step, n.Try)
	case n.Step != "":
		where = n.Step // of the step, not of one of its tries: a loop's round or end
	}
	status := n.Status
	if n.Event != "" {
		status += " (" + n.Event + ")" // what happened beyond the seed's word
	}
	fmt.Fprintf(b, "  %s  %s  %s: %s", engine.ClockTime(n.Time, now), where, status, firstLine(n.Output, 80))
	if n.Next != "" && n.Next != "none" {
		fmt.Fprintf(b, " — next: %s", firstLine(n.Next, 60))
	}
	b.WriteString("\n")
}

// writeRejected lists the rejected plans with their first errors.
func writeRejected(b *bytes.Buffer, plans []engine.PlanListing) {
	const shown = 3
	if len(plans) == 0 {
		return
	}
	b.WriteString("\nrejected plans:\n")
	for _, p := range plans {
		fmt.Fprintf(b, "  %s: %s\n", p.File, plural(p.ErrorCount, "error"))
		for i, e := range p.Errors {
			if i == shown {
				fmt.Fprintf(b, "    … %d more: stepseq list\n", len(p.Errors)-shown)
				break
			}
			fmt.Fprintf(b, "    %s\n", firstLine(e, 100))
		}
	}
}

// plural is n and the noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// ansi matches the colour sequences paint writes.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// screenRows is how many terminal rows text takes on a terminal width columns
// wide (0: unknown, one row a line).
func screenRows(text string, width int) int {
	rows := 0
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		n := utf8.RuneCountInString(ansi.ReplaceAllString(strings.TrimSuffix(line, "\n"), ""))
		if width > 0 && n > width {
			rows += (n + width - 1) / width
		} else {
			rows++
		}
	}
	return rows
}

// writeValues writes a line "what: k=v …" of values in JSON, none when empty.
func writeValues(b *bytes.Buffer, what string, values map[string]any) {
	if len(values) == 0 {
		return
	}
	b.WriteString(what + ":")
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v, _ := json.Marshal(values[k])
		fmt.Fprintf(b, " %s=%s", k, v)
	}
	b.WriteString("\n")
}

// writeLoops writes a line per repeat group: where its loop stands, and its
// running totals under it when it keeps any.
func writeLoops(b *bytes.Buffer, loops []engine.LoopReport) {
	for _, l := range loops {
		fmt.Fprintf(b, "loop %s (%s): ", l.Group, strings.Join(l.Steps, " → "))
		switch {
		case l.Round == 0:
			b.WriteString("not started\n")
		case l.Ended != "":
			fmt.Fprintf(b, "ended in round %d/%d: %s\n", l.Round, l.Max, l.Reason)
		default:
			fmt.Fprintf(b, "round %d/%d\n", l.Round, l.Max)
		}
		writeValues(b, "  totals", l.Totals)
	}
}

// writeText writes the report as a table for people; times are shown relative
// to now, the time the report was made.
func writeText(b *bytes.Buffer, r engine.StatusReport, now time.Time, color bool) {
	writeHeadline(b, r, color)
	writeValues(b, "params", r.Params)
	writeValues(b, "summary", r.Summary)
	writeLoops(b, r.Loops)
	writeSpend(b, r)
	b.WriteString("\n")

	header := []string{"STEP", "TITLE", "STATUS", "TRIES", "LAST RUN", "DURATION", "ERROR"}
	if r.Graph {
		// Steps side by side: what each waits for, before its error.
		header = []string{"STEP", "TITLE", "STATUS", "TRIES", "LAST RUN", "DURATION", "NEEDS", "ERROR"}
	}
	var cells [7]string
	writeRows(b, len(r.Steps)+1, func(i int) []string {
		if i == 0 {
			return header
		}
		s := r.Steps[i-1]
		cells = stepCells(s, now)
		if r.Graph {
			return append(cells[:6:6], needsCell(s), cells[6])
		}
		return cells[:]
	}, 2, color)

	if len(r.Blockers) > 0 {
		b.WriteString("\nblockers:\n")
		for _, bl := range r.Blockers {
			fmt.Fprintf(b, "  %s\n", bl)
		}
	}
	b.WriteString("\n")
	writeNow(b, r)
}

// writeHeadline writes the plan's line: its name, status and where it stands.
func writeHeadline(b *bytes.Buffer, r engine.StatusReport, color bool) {
	name := r.Plan
	if name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(b, "plan %s: %s", name, paint(r.Run, color))
	switch n := len(r.Steps); {
	case r.Status == planspec.StatusDone:
		fmt.Fprintf(b, ", %s\n", plural(n, "step"))
	case r.Cursor < n && r.Progress != "":
		fmt.Fprintf(b, ", step %d of %d (%s), %s\n", r.Cursor+1, n, r.Steps[r.Cursor].ID, r.Progress)
	case r.Cursor < n:
		fmt.Fprintf(b, ", step %d of %d (%s)\n", r.Cursor+1, n, r.Steps[r.Cursor].ID)
	default:
		fmt.Fprintf(b, ", all %s passed\n", plural(n, "step"))
	}
}

// stepCells is a step's row of the table.
func stepCells(s engine.StepReport, now time.Time) [7]string {
	lastRun := "-"
	if s.LastRunIso != nil {
		lastRun = *s.LastRunIso
		if t, err := planspec.ParseISO(*s.LastRunIso); err == nil {
			lastRun = engine.ClockTime(t, now)
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
	if status == planspec.StatusInProgress || s.Phase == planspec.PhaseBlocked || s.Phase == planspec.PhaseWaiting || s.Phase == planspec.PhaseAwaitingApproval {
		status = s.Phase // never "in progress" before the worker said so
	}
	if s.Skipped {
		status += " (skipped)"
	}
	errText := ""
	if s.Error != nil {
		errText = firstLine(*s.Error, 60)
	}
	tries := strconv.Itoa(s.Tries) + " of " + strconv.Itoa(s.MaxTries)
	return [...]string{s.ID, clip(s.Title, 40), status, tries, lastRun, duration, errText}
}

// writeNow writes who moves the plan and what it waits for now.
func writeNow(b *bytes.Buffer, r engine.StatusReport) {
	switch {
	case r.Runner != nil && r.Runner.Kind == "watch":
		fmt.Fprintf(b, "sidecar: live (pid %d)\n", r.Runner.PID)
	case r.Runner != nil:
		fmt.Fprintf(b, "runner: stepseq %s (pid %d)\n", r.Runner.Kind, r.Runner.PID)
	case r.Status != planspec.StatusDone:
		b.WriteString("sidecar: none: nothing moves the plan until stepseq watch (or stepseq check) runs\n")
	}
	if len(r.Running) > 1 {
		fmt.Fprintf(b, "running now: %s\n", strings.Join(r.Running, ", "))
	}
	switch {
	case r.WaitingFor.Action == core.Idle.String():
		fmt.Fprintf(b, "now: %s\n", r.WaitingFor.Reason)
	case r.WaitingFor.Step != "" && !strings.HasPrefix(r.WaitingFor.Reason, r.WaitingFor.Step+": "):
		fmt.Fprintf(b, "now: %s: %s\n", r.WaitingFor.Step, r.WaitingFor.Reason)
	default:
		fmt.Fprintf(b, "now: %s\n", r.WaitingFor.Reason)
	}
	if len(r.WaitingFor.MissingOutputs) > 0 {
		fmt.Fprintf(b, "missing outputs: %s\n", strings.Join(r.WaitingFor.MissingOutputs, ", "))
	}
	writeSandbox(b, "", r.Sandbox)
}

// writeSandbox writes which steps run sandboxed, which edit unattended without
// a sandbox, and what a sandbox keeps from working, each line after prefix.
func writeSandbox(b *bytes.Buffer, prefix string, v *engine.SandboxView) {
	for _, l := range v.Lines() {
		fmt.Fprintf(b, "%s%s\n", prefix, l)
	}
}

// writeTable pads columns to their widest cell, measured without colour, and
// colours the cells of column col.
func writeTable(b *bytes.Buffer, rows [][]string, col int, color bool) {
	writeRows(b, len(rows), func(r int) []string { return rows[r] }, col, color)
}

// writeRows is writeTable of n rows made by row, which is called twice for each
// (to measure, then to write) and may reuse the slice it returns: a table of
// 10,000 steps is not held whole.
func writeRows(b *bytes.Buffer, n int, row func(r int) []string, col int, color bool) {
	var widths []int
	for r := range n {
		cells := row(r)
		if widths == nil {
			widths = make([]int, len(cells))
		}
		for i, cell := range cells {
			widths[i] = max(widths[i], displayWidth(cell))
		}
	}
	for r := range n {
		start := b.Len()
		cells := row(r)
		for i, cell := range cells {
			text := cell
			if r > 0 && i == col {
				text = paint(cell, color)
			}
			b.WriteString(text)
			if i < len(cells)-1 {
				for range widths[i] - displayWidth(cell) + 2 {
					b.WriteByte(' ')
				}
			}
		}
		b.Truncate(start + len(bytes.TrimRight(b.Bytes()[start:], " ")))
		b.WriteString("\n")
	}
}

// displayWidth is how many terminal columns s takes: East Asian wide characters
// and emoji take two, combining marks and joiners none, the others one.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == 0x200D || r >= 0xFE00 && r <= 0xFE0F:
		case wide(r):
			n += 2
		default:
			n++
		}
	}
	return n
}

// wide reports whether r takes two columns: the East Asian wide and full-width
// blocks and the emoji planes.
func wide(r rune) bool {
	switch {
	case r < 0x1100:
		return false
	case r <= 0x115F, // Hangul Jamo
		r >= 0x2E80 && r <= 0xA4CF && r != 0x303F,              // CJK radicals … Yi
		r >= 0xAC00 && r <= 0xD7A3,                             // Hangul syllables
		r >= 0xF900 && r <= 0xFAFF,                             // CJK compatibility ideographs
		r >= 0xFE30 && r <= 0xFE4F,                             // CJK compatibility forms
		r >= 0xFF00 && r <= 0xFF60, r >= 0xFFE0 && r <= 0xFFE6, // full-width forms
		r >= 0x1F300 && r <= 0x1F64F, r >= 0x1F900 && r <= 0x1F9FF, // emoji
		r >= 0x1F680 && r <= 0x1F6FF, // transport and map symbols
		r >= 0x20000 && r <= 0x3FFFD: // CJK extensions
		return true
	}
	return false
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
		core.RunDone:              "32",
		core.RunBlocked:           "31",
		core.RunActive:            "33",
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

// terminalWidth is w's width in columns when it is a terminal, else 0.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// needsCell is what a step of a graph waits for: its needs, "-" for one that
// starts with the run, and the branch of a step that runs in a worktree.
func needsCell(s engine.StepReport) string {
	cell := "-"
	if len(s.Needs) > 0 {
		cell = clip(strings.Join(s.Needs, ","), 40)
	}
	if s.Branch != "" {
		cell += " (" + s.Branch + ")"
	}
	return cell
}
