package planspec

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// IDPatternJSON is what a step id (and a plan name) may be: letters, digits, ".",
// "_" and "-", with at least one character that is not a dot, so that no id is
// "." or "..": ids become directory names under .stepseq/logs/. isID checks it.
const IDPatternJSON = `^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$`

// isID matches idPatternJSON, without a regexp: it runs for every step.
func isID(id string) bool {
	notDot := false
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c == '.':
		case c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			notDot = true
		default:
			return false
		}
	}
	return notDot
}

func CheckID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty %s: want letters, digits, \".\", \"_\" or \"-\", like \"build\"", what)
	case strings.Trim(id, ".") == "":
		return fmt.Errorf("%s %q: cannot be only dots; want letters, digits, \".\", \"_\" or \"-\", like \"build\"", what, Clip(id, 40))
	case !isID(id):
		msg := fmt.Sprintf("%s %q: want only ASCII letters and digits, \".\", \"_\" or \"-\"", what, Clip(id, 40))
		if s := suggestID(id); s != "" {
			msg += fmt.Sprintf(", like %q", s)
		}
		return errors.New(msg)
	}
	return nil
}

// suggestID turns a bad id into a good one for the message, replacing spaces,
// slashes and the like with "-". It gives up on ids with non-ASCII letters,
// where dropping them would make a different word.
func suggestID(id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case unicode.IsLetter(r) && r >= utf8.RuneSelf:
			return ""
		case r < utf8.RuneSelf && (r == '.' || r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)):
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-.")
	if s == "" {
		return "build"
	}
	return Clip(s, 40)
}

// CheckPath accepts a path relative to the workspace that stays inside it
// lexically ("a/../b" is fine, "../b" and "/b" are not). Symlinks are the reader's
// business: os.Root refuses to follow them out.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path: want a path relative to the workspace, like \"out/report.md\"")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q contains a NUL byte", Clip(p, 60))
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return fmt.Errorf("absolute path %q: want a path relative to the workspace, like %q", Clip(p, 60), relativeHint(p))
	case !filepath.IsLocal(p):
		return fmt.Errorf("path %q leaves the workspace: want a path inside it, without leading \"..\"", Clip(p, 60))
	}
	return nil
}

// CheckGlob accepts a doublestar pattern relative to the workspace with no ".."
// component anywhere (not even inside {a,b} alternatives).
func CheckGlob(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty glob: want a pattern relative to the workspace, like \"notes/**/*.md\"")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("glob %q contains a NUL byte", Clip(p, 60))
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return fmt.Errorf("absolute glob %q: want a pattern relative to the workspace, like %q", Clip(p, 60), relativeHint(p))
	case !doublestar.ValidatePattern(p):
		return fmt.Errorf("bad glob %q: unbalanced [ ] or { }, or a trailing \\", Clip(p, 60))
	}
	for _, part := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '{' || r == '}' || r == ',' }) {
		if part == ".." {
			return fmt.Errorf("glob %q leaves the workspace: want a pattern without \"..\"", Clip(p, 60))
		}
	}
	return nil
}

// FSPath turns a workspace-relative path into the form io/fs wants ("a/b", "."),
// or reports that it cannot name anything inside the workspace.
func FSPath(p string) (string, bool) {
	if CheckPath(p) != nil {
		return "", false
	}
	return path.Clean(filepath.ToSlash(p)), true
}

func relativeHint(p string) string {
	p = strings.TrimLeft(filepath.ToSlash(p), "/")
	if p == "" {
		return "out/report.md"
	}
	return p
}

// MatchGlob reports whether path matches glob, a pattern checked when the plan
// was read (`on:`): ** crosses folders.
func MatchGlob(glob, path string) bool {
	ok, _ := doublestar.Match(glob, path)
	return ok
}
