package web

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// page is what the template renders: the view, with what the template would
// otherwise compute (labels, classes, durations, the graph) done in Go.
type page struct {
	Title       string // the document's title
	Plan        string
	Status      string
	StatusClass string
	Waiting     string
	Blockers    []string
	Sandbox     []string
	Params      []Field
	Summary     []Field
	Spend       string
	Steps       []stepRow
	Graph       graph
	Phases      []phaseKey
	Notes       []noteRow
	// NotesLeftOut counts the older notifications the page leaves out.
	NotesLeftOut int
	Runs         []runRow
	Gate         *GateView
	// Buttons: the page answers the gate itself (the listener has a token,
	// and a CSRF token is set); otherwise it shows the commands.
	Buttons bool
}

// runRow is a run beside the workspace's own, with its status's class.
type runRow struct {
	RunView
	Class string
}

// maxNotes is how many notifications the page shows, the newest.
const maxNotes = 100

type stepRow struct {
	N          int
	Anchor     string // an element id made of the index, never of the step id
	ID, Title  string
	PhaseClass string
	PhaseLabel string
	Status     string
	Tries      int
	Duration   string
	DurationMs int64 // for the script that ticks a running duration
	Running    bool
	Error      string
	Blocker    string
	Waits      string // what a waiting step waits for
	Report     *reportRow
	Log        string
	LogCut     bool // the log was cut to its tail
	LogOpen    bool // shown unfolded: the step is at work or blocked
	Spend      string
}

type reportRow struct {
	Status, Summary, Evidence, Risk, Next string
	Class                                 string
	Time                                  timeText
}

type noteRow struct {
	Time                timeText
	Step                string
	Try                 int
	Status, StatusClass string
	Event               string
	Output, Next        string
	Run                 string
}

type timeText struct {
	ISO, Clock string
}

type phaseKey struct{ Class, Label string }

// knownPhases are the phases in the order a step goes through them, with the
// CSS class that colours each.
var knownPhases = []string{PhasePlanned, PhaseAwaitingApproval, PhaseDispatching, PhaseInProgress, PhaseReviewing, PhaseDone, PhaseBlocked, PhaseWaiting}

func newPage(v View, now time.Time, logBytes int) page {
	p := page{
		Title: strings.Join(slices.DeleteFunc([]string{v.Status, v.Plan, "stepseq"}, func(s string) bool { return s == "" }), " · "),
		Plan:  v.Plan, Status: v.Status, StatusClass: token(v.Status), Waiting: v.Waiting,
		Blockers: v.Blockers, Sandbox: v.Sandbox, Params: v.Params, Summary: v.Summary, Gate: v.Gate, Spend: v.Spend,
	}
	for _, r := range v.Runs {
		p.Runs = append(p.Runs, runRow{RunView: r, Class: runClass(r.Status)})
	}
	for _, ph := range knownPhases {
		p.Phases = append(p.Phases, phaseKey{Class: phaseClass(ph), Label: phaseLabel(ph, v.Reports)})
	}
	for i, s := range v.Steps {
		r := stepRow{
			N: i + 1, Anchor: fmt.Sprintf("step-%d", i+1), ID: s.ID, Title: s.Title, Spend: s.Spend,
			PhaseClass: phaseClass(s.Phase), PhaseLabel: phaseLabel(s.Phase, v.Reports),
			Status: s.Status, Tries: s.Tries, Running: s.Running,
			Error: strings.TrimSpace(s.Error), Blocker: s.Blocker, Waits: s.Waits,
			LogOpen: s.Running || s.Phase == PhaseDispatching || s.Phase == PhaseInProgress || s.Phase == PhaseBlocked,
		}
		if s.DurationMs != nil {
			r.DurationMs = *s.DurationMs
			r.Duration = formatDuration(time.Duration(*s.DurationMs) * time.Millisecond)
		}
		if rep := s.LastReport; rep != nil {
			r.Report = &reportRow{
				Status: rep.Status, Summary: rep.Summary, Evidence: rep.Evidence, Risk: rep.Risk,
				Next: rep.Next, Class: token(rep.Status), Time: newTimeText(rep.Time, now),
			}
		}
		r.Log, r.LogCut = logTail(s.LogTail, logBytes)
		p.Steps = append(p.Steps, r)
	}
	p.Graph = layout(v, p.Steps)
	notes := v.Notifications
	if len(notes) > maxNotes {
		p.NotesLeftOut, notes = len(notes)-maxNotes, notes[len(notes)-maxNotes:]
	}
	for _, n := range slices.Backward(notes) {
		p.Notes = append(p.Notes, noteRow{
			Time: newTimeText(n.Time, now), Step: n.Step, Try: n.Try,
			Status: n.Status, StatusClass: token(n.Status), Event: n.Event, Output: n.Output, Next: n.Next, Run: n.Run,
		})
	}
	return p
}

// phaseClass is the CSS class of a phase; a phase the page does not know is
// grey.
func phaseClass(phase string) string {
	if slices.Contains(knownPhases, phase) {
		return "ph-" + phase
	}
	return "ph-unknown"
}

// phaseLabel words a phase. Without worker reports nobody accepted a step, so
// in_progress only means its agent runs.
func phaseLabel(phase string, reports bool) string {
	switch {
	case phase == "":
		return "unknown"
	case phase == PhaseInProgress && !reports:
		return "running"
	}
	return strings.ReplaceAll(phase, "_", " ")
}

// token makes a status usable in a class name: lowercase letters, digits and
// dashes; anything else becomes a dash.
func token(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	if len(b) > 24 {
		b = b[:24]
	}
	return "st-" + string(b)
}

func newTimeText(t, now time.Time) timeText {
	if t.IsZero() {
		return timeText{}
	}
	t, now = t.Local(), now.Local()
	clock := t.Format("2006-01-02 15:04:05")
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		clock = t.Format("15:04:05")
	}
	return timeText{ISO: t.Format(time.RFC3339), Clock: clock}
}

// formatDuration is a duration as a person reads it: 850ms, 4.2s, 3m07s, 1h02m.
// The page's script words a ticking duration the same way.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// stripEscapes removes the terminal escape sequences (colours, cursor moves,
// titles) that agents print and a page cannot show: CSI (ESC [ … final), OSC
// (ESC ] … BEL or ESC \\) and the two-byte ones.
func stripEscapes(s string) string {
	if strings.IndexByte(s, 0x1b) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if s[i] != 0x1b {
			j := strings.IndexByte(s[i:], 0x1b)
			if j < 0 {
				j = len(s) - i
			}
			b.WriteString(s[i : i+j])
			i += j
			continue
		}
		i++
		switch {
		case i == len(s):
		case s[i] == '[':
			i++
			for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f { // parameters, intermediates
				i++
			}
			if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e { // the final byte
				i++
			}
		case s[i] == ']':
			end := strings.IndexAny(s[i:], "\x07\x1b")
			if end < 0 {
				return b.String() // unterminated: the rest is the sequence
			}
			i += end + 1
			if s[i-1] == 0x1b && i < len(s) && s[i] == '\\' {
				i++
			}
		case s[i] >= '@' && s[i] <= '_':
			i++
		}
	}
	return b.String()
}

// logTail is the last limit bytes of a log, starting on a whole line when one
// fits, as a terminal would show it: without escapes, and of a line that
// carriage returns overwrote (a progress bar), only the last part. Other
// control characters and invalid UTF-8 become U+FFFD.
func logTail(s string, limit int) (tail string, cut bool) {
	if limit > 0 && len(s) > 4*limit { // spare the cleaning what would be cut anyway
		s, cut = s[len(s)-4*limit:], true
	}
	s = stripEscapes(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = l
	}
	s = strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			return utf8.RuneError
		}
		return r
	}, strings.Join(lines, "\n"))
	if limit > 0 && len(s) > limit {
		s, cut = s[len(s)-limit:], true
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	if i := strings.IndexByte(s, '\n'); cut && i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return s, cut
}

// runClass is the pill class of a run's status: a phase's colour.
func runClass(status string) string {
	switch status {
	case "active":
		return phaseClass(PhaseInProgress)
	case "blocked", "invalid":
		return phaseClass(PhaseBlocked)
	case "done":
		return phaseClass(PhaseDone)
	}
	return phaseClass(PhasePlanned)
}
