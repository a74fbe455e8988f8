package web

import (
	"slices"
	"sync"
	"time"
)

// fakeSource is a Source whose view the test sets.
type fakeSource struct {
	Signal
	mu sync.Mutex
	v  View
}

func newFakeSource(v View) *fakeSource { return &fakeSource{v: v} }

func (f *fakeSource) View() View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.v
}

// Set changes the view with fn and tells the pages.
func (f *fakeSource) Set(fn func(v *View)) {
	f.SetQuietly(fn)
	f.Notify()
}

// SetQuietly changes the view with fn and tells no one, as a log grows. fn
// changes a copy: the views handed out stay as they were.
func (f *fakeSource) SetQuietly(fn func(v *View)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.v
	v.Blockers, v.Steps = slices.Clone(v.Blockers), slices.Clone(v.Steps)
	v.Notifications, v.Edges = slices.Clone(v.Notifications), slices.Clone(v.Edges)
	fn(&v)
	f.v = v
}

func ms(d time.Duration) *int64 { n := d.Milliseconds(); return &n }

// at is a fixed time of day, so that pages show the same clock in every run.
var at = time.Date(2026, 3, 14, 9, 26, 53, 0, time.Local)

// sampleView is a plan of four steps in four phases, with a report, a log and
// notifications.
func sampleView() View {
	return View{
		Plan: "research-paper", Status: "active", Waiting: "running (try 1)", Reports: true,
		Steps: []StepView{
			{ID: "research", Title: "Research topic X", Phase: PhaseDone, Status: "DONE", Tries: 1,
				DurationMs: ms(94 * time.Second), LogTail: "searching…\nwrote study/summary.md\n",
				LastReport: &ReportView{Status: "done", Summary: "Summary written", Evidence: "study/summary.md",
					Risk: "none", Next: "none", Time: at}},
			{ID: "outline", Title: "Outline the paper", Phase: PhaseReviewing, Status: "IN_PROGRESS", Tries: 2,
				DurationMs: ms(12 * time.Second), Error: "try 1: missing output paper/outline.md",
				LogTail: "drafting outline\n"},
			{ID: "paper", Title: "Write the paper", Phase: PhaseDispatching, Status: "IN_PROGRESS", Tries: 1,
				DurationMs: ms(800 * time.Millisecond), Running: true},
			{ID: "review", Title: "Review", Phase: PhasePlanned, Status: "PENDING"},
		},
		Notifications: []NoteView{
			{Time: at, Step: "research", Try: 1, Status: "done", Output: "Summary written", Next: "none"},
			{Time: at.Add(time.Minute), Step: "paper", Try: 1, Status: "dispatching", Output: "agent launched", Next: "wait for accepted"},
		},
	}
}
