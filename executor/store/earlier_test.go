package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWorkspace_SetAsideEarlierRun: a run's first try sets the earlier run's
// logs aside under one stamp, and, when that run's last try printed nothing and
// left no log, an empty log for it, so that the run counts by its tries; a try
// that is not a run's first, or the first of the first run, sets nothing aside.
func TestWorkspace_SetAsideEarlierRun(t *testing.T) {
	for _, c := range []struct {
		name    string
		logs    []string // N.log files there before
		try     int
		earlier int
		want    []string // the folder after, stamps as STAMP
	}{
		{"the first run", nil, 1, 0, nil},
		{"a second try", []string{"1.log"}, 2, 0, []string{"1.log"}},
		{"a re-run of a run that printed", []string{"1.log", "2.log"}, 1, 2, []string{"earlier-STAMP-1.log", "earlier-STAMP-2.log"}},
		{"a re-run of a silent run", nil, 1, 3, []string{"earlier-STAMP-3.log"}},
		{"a re-run whose last try was silent", []string{"1.log"}, 1, 2, []string{"earlier-STAMP-1.log", "earlier-STAMP-2.log"}},
		{"a state from before the count", []string{"1.log"}, 1, 0, []string{"earlier-STAMP-1.log"}},
		{"the count on a later try", []string{"1.log"}, 2, 4, []string{"1.log"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, err := NewWorkspace(filepath.Join(t.TempDir(), "state.json"))
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Dir(ws.LogPath("s", 1))
			for _, name := range c.logs {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte("output\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := ws.SetAsideEarlierRun("s", c.try, c.earlier); err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(dir)
			var got []string
			stamps := map[string]bool{}
			for _, e := range entries {
				name := e.Name()
				if rest, ok := strings.CutPrefix(name, "earlier-"); ok {
					i := strings.LastIndexByte(rest, '-')
					stamps[rest[:i]] = true
					name = "earlier-STAMP" + rest[i:]
				}
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) || len(stamps) > 1 {
				t.Errorf("after: %v (%d stamps), want %v under one stamp", got, len(stamps), c.want)
			}
		})
	}
}
