// Package plan reads stepseq's YAML plans into the state they start, and
// compiles and evaluates the expressions of step conditions and the templates
// of titles, instructions and agents' arguments. It stands on planspec, whose
// model it reads and fills, and is as pure: it parses from readers and reads
// files only where a condition asks it to, under the workspace root it is given.
package plan
