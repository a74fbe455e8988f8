package watcher

import (
	"strconv"
	"strings"
)

// scratch reports whether base, a file name, is a scratch file that an editor
// or an atomic writer makes on its way to saving the real one: a swap file, a
// backup, a lock, or a temporary file renamed into place. Changes to those are
// noise; the save itself shows up under the real name (a rename into place is
// a Create of the final name).
func scratch(base string) bool {
	switch {
	case base == "":
		return false
	case strings.HasSuffix(base, "~"): // vim, emacs, nano backups
		return true
	case strings.HasPrefix(base, ".#"): // emacs lock link
		return true
	case len(base) > 2 && base[0] == '#' && base[len(base)-1] == '#': // emacs auto-save
		return true
	case strings.HasSuffix(base, "___jb_tmp___"), strings.HasSuffix(base, "___jb_old___"): // JetBrains safe write
		return true
	case strings.HasSuffix(base, ".kate-swp"), strings.HasPrefix(base, ".goutputstream-"): // Kate, gedit
		return true
	}
	return vimSwap(base) || vimProbe(base) || atomicTemp(base)
}

// vimSwap matches vim's swap files: .swp, then .swo and .swn when the first
// is taken, and .swx, which vim creates to probe the directory. (Vim goes on
// down to .swa, but those are rare and the letters clash with real formats.)
func vimSwap(base string) bool {
	i := strings.LastIndex(base, ".sw")
	if i <= 0 || len(base) != i+4 {
		return false
	}
	c := base[i+3]
	return c == 'p' || c == 'o' || c == 'n' || c == 'x'
}

// vimProbe matches the files vim creates to test whether it may write a
// directory before a save: "4913", then 4913+123k while the name is taken.
func vimProbe(base string) bool {
	if len(base) < 4 || len(base) > 6 {
		return false
	}
	n, err := strconv.Atoi(base)
	return err == nil && n >= 4913 && (n-4913)%123 == 0
}

// atomicTemp matches temporary files that atomic writers rename into place:
// "x.tmp", ".x.tmp123" or "x.tmp.123", and renameio's (and os.CreateTemp's
// with a dot prefix) ".x" followed by a long random number.
func atomicTemp(base string) bool {
	if strings.HasSuffix(strings.ToLower(base), ".tmp") {
		return true
	}
	digits := len(base) - len(strings.TrimRight(base, "0123456789"))
	if digits == 0 {
		return false
	}
	head := strings.TrimRight(base[:len(base)-digits], "._-")
	if strings.HasSuffix(strings.ToLower(head), ".tmp") {
		return true
	}
	return base[0] == '.' && digits >= 9 && len(base) > digits+1
}
