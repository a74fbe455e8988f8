// Package planspec owns stepseq's model of a run and the state.json contract of
// the Agent Step Sequencer skill: the state, its steps and runs, loops, reports,
// results and agents, and the codec that reads and writes state.json. Reading
// plans and compiling their conditions and templates is planspec/plan's, which
// imports this package; this one imports neither it nor anything that runs.
// It is pure: it parses from readers and encodes to bytes, and never opens files
// on its own, launches processes or watches anything. Opening and writing files
// is the caller's job.
package planspec
