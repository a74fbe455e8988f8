package proc

import (
	"os"

	"github.com/stepseq/stepseq/planspec"
)

// MissingOutputs lists the step's required outputs that do not exist as a file or
// directory inside root. A path that resolves outside it (.., absolute, a symlink
// leading out) counts as missing.
func MissingOutputs(spec *planspec.StepSpec, root *os.Root) []string {
	if spec == nil {
		return nil
	}
	return MissingIn(root, spec.RequiredOutputs)
}

// MissingIn lists the paths that do not exist as a file or directory inside root.
func MissingIn(root *os.Root, paths []string) []string {
	var missing []string
	for _, rel := range paths {
		if root == nil {
			missing = append(missing, rel)
			continue
		}
		fi, err := root.Stat(rel)
		if err != nil || (!fi.Mode().IsRegular() && !fi.IsDir()) {
			missing = append(missing, rel)
		}
	}
	return missing
}
