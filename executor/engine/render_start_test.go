package engine

import (
	"testing"

	"github.com/stepseq/stepseq/executor/store"
)

// A run started holds plain text for every instruction and title whose
// template reads only params, so that the original scripts resuming it send
// "Release v1.2", not "${params.tag}"; a template that reads a step's result
// waits for its try, its source kept.
func TestStartRun_RendersParamsOnlyTemplatesAtStart(t *testing.T) {
	dir := t.TempDir()
	src := "name: rel\nparams:\n  tag: {type: string}\nsteps:\n" +
		"  - id: a\n    title: Release ${params.tag}\n    instruction: Release ${params.tag} now\n" +
		"  - id: b\n    title: Announce\n    instruction: Announce ${steps.a.result}\n"
	pf := testRunPlan(t, dir, "rel", src)
	rt := &Runtime{WS: store.Workspace{Dir: dir}, Getenv: func(string) string { return "" }}
	info, err := rt.StartRun(RunStart{Plan: pf, Params: map[string]any{"tag": "v1.2"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := (&store.StateFile{Path: store.RunStatePath(dir, info.Name)}).Read()
	if err != nil {
		t.Fatal(err)
	}
	if a := st.Steps["a"]; a.Instruction != "Release v1.2 now" || a.Title != "Release v1.2" || a.InstructionTemplate != "Release ${params.tag} now" {
		t.Errorf("step a: title %q, instruction %q, template %q; want them rendered, the template kept", a.Title, a.Instruction, a.InstructionTemplate)
	}
	if b := st.Steps["b"]; b.Instruction != "Announce ${steps.a.result}" {
		t.Errorf("step b: instruction %q, want its template until its try", b.Instruction)
	}
}
