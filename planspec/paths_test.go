package planspec

import (
	"regexp"
	"testing"
)

func TestIsID(t *testing.T) {
	re := regexp.MustCompile(IDPatternJSON)
	for _, id := range []string{"a", "build", "test.unit_1", "A-9", "_", "-", ".a", "a.", "...a", ".", "..", "...", "",
		"a b", "a/b", "écrire", "a\n", "x\x00"} {
		if got, want := isID(id), re.MatchString(id); got != want {
			t.Errorf("isID(%q) = %v, the schema's pattern says %v", id, got, want)
		}
	}
}
