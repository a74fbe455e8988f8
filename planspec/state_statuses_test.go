package planspec

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReadStatuses tells the statuses ParseState reads, and a shape it cannot
// read as an invalid state.
func TestReadStatuses(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     Statuses
		bad      bool
	}{
		{"done", `{"plan":{"steps":{"a":{"title":"A","instruction":"x"}}},"stepQueue":["a"],"stepRuns":{"a":{"tries":1,"status":"DONE","stepseq":{"errors":[{"try":1,"error":"x"}]}}},"status":"DONE"}`,
			Statuses{Status: StatusDone, Runs: map[string]string{"a": StatusDone}}, false},
		{"no runs", `{"status":"IN_PROGRESS","stepRuns":null}`, Statuses{Status: StatusInProgress, Runs: map[string]string{}}, false},
		{"a run without status", `{"stepRuns":{"a":{"tries":1},"b":{"status":"FAILED"}}}`,
			Statuses{Status: StatusInProgress, Runs: map[string]string{"a": StatusPending, "b": StatusFailed}}, false},
		{"a status not a string", `{"status":["DONE"],"stepRuns":{"a":{"status":{"x":1}}}}`,
			Statuses{Status: StatusInProgress, Runs: map[string]string{"a": StatusPending}}, false},
		{"cut off", `{"plan":{"steps":{"a":{"title":"A","instr`, Statuses{}, true},
		{"not an object", `["DONE"]`, Statuses{}, true},
		{"a run not an object", `{"stepRuns":{"a":"DONE"}}`, Statuses{}, true},
		{"empty", ``, Statuses{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadStatuses(strings.NewReader(c.in), "state.json")
			if c.bad {
				if !errors.Is(err, ErrInvalidState) || !strings.Contains(err.Error(), "state.json") {
					t.Errorf("err %v, want an invalid state naming the file", err)
				}
				return
			}
			if err != nil || got.Status != c.want.Status || !maps.Equal(got.Runs, c.want.Runs) {
				t.Errorf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// FuzzReadStatuses: ReadStatuses never panics, and of a state ParseState
// accepts it reads the statuses ParseState reads.
func FuzzReadStatuses(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "*", "*.json"))
	for _, path := range seeds {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Add(longState(3))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ReadStatuses(bytes.NewReader(data), "state.json")
		if err != nil && !errors.Is(err, ErrInvalidState) {
			t.Fatalf("an error that is not ErrInvalidState: %v", err)
		}
		st, perr := ParseState(bytes.NewReader(data), "state.json")
		if perr != nil {
			return
		}
		if err != nil {
			t.Fatalf("ParseState reads it, ReadStatuses refuses it: %v", err)
		}
		want := map[string]string{}
		for id, r := range st.StepRuns {
			want[id] = r.Status
		}
		if got.Status != st.Status || !maps.Equal(got.Runs, want) {
			t.Fatalf("statuses %+v, ParseState reads %s %v", got, st.Status, want)
		}
	})
}
