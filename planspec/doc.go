// Package planspec owns stepseq's file formats: the state.json contract of the
// Agent Step Sequencer skill, YAML plans, and the expressions of step conditions.
// It is pure: it parses from readers and encodes to bytes, and never opens files on
// its own, launches processes or watches anything. Opening and writing files is the
// caller's job.
package planspec
