package engine

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// stepseq never writes a state it would refuse to read: a state over the read
// cap is not written, and the file on disk stays as it was.
func TestStateFile_NeverWritesOverTheReadCap(t *testing.T) {
	defer func(was int) { store.StateWriteCap = was }(store.StateWriteCap)
	store.StateWriteCap = 1 << 20
	w := newTestWS(t, plan("", `"instruction":"x"`))
	before, _ := os.ReadFile(w.state)
	st := w.read()
	st.Steps["s1"] = &planspec.StepSpec{Title: "big", Instruction: strings.Repeat("x", store.StateWriteCap)}
	err := (&store.StateFile{Path: w.state}).Write(st)
	if !errors.Is(err, store.ErrStateTooBig) || !strings.Contains(err.Error(), "over the 1 MiB that stepseq reads back") {
		t.Fatalf("err = %v, want ErrStateTooBig naming the cap", err)
	}
	if after, _ := os.ReadFile(w.state); string(after) != string(before) {
		t.Error("the state on disk changed")
	}
}

// A plan whose fresh state is over a quarter of the read cap is refused at
// intake, with the figure, before anything is archived or written.
func TestApplyPlan_RefusesAStateTooBigToRun(t *testing.T) {
	defer func(was, plan int) { store.StateWriteCap, store.PlanStateCap = was, plan }(store.StateWriteCap, store.PlanStateCap)
	store.StateWriteCap, store.PlanStateCap = 4<<20, 1<<20
	w := newTestWS(t, "")
	p := &planpkg.Plan{Settings: planspec.Settings{Name: "big"}, Steps: []planpkg.PlanStep{{ID: "a", Spec: planspec.StepSpec{Title: "a", Instruction: strings.Repeat("x", store.PlanStateCap)}}}}
	_, _, err := w.chain().ApplyPlan(&store.StateFile{Path: w.state}, core.PlanFile{Source: "plans/big.yaml", Name: "big", Hash: "sha256:1", Plan: p}, true)
	if !errors.Is(err, store.ErrStateTooBig) || !strings.Contains(err.Error(), "would start at 1.0 MiB, over the 1 MiB a plan may take (a quarter of the 4 MiB state cap") {
		t.Fatalf("err = %v, want ErrStateTooBig with the figures", err)
	}
	if _, err := os.Stat(w.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.json written: %v", err)
	}
}
