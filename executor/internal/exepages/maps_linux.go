package exepages

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// span is one mapping of /proc/PID/smaps, with the counts that say whether all
// of its resident pages are clean pages of its file.
type span struct {
	start, end uintptr
	perms      string
	dev, inode string
	// own is the mapping's Anonymous and Swap counts, in kB: pages copied on
	// write, in memory or swapped out, which the file does not hold, such as
	// the relocations the dynamic loader wrote into a position-independent
	// binary's read-only data (RELRO) before it made them read-only. (Private_Dirty is no guide: it
	// counts the file's own pages not yet written back, as in a binary just
	// built, which the page cache keeps.)
	own int64
}

// cleanSpans reads /proc/PID/smaps and returns the read-only private mappings
// (code, read-only data) of the file mapped at pc whose pages are all the
// file's: dropping them loses nothing, since a page touched again is read back
// from the page cache. A mapping with a page of its own (Anonymous) is left
// alone. The mapping that holds pc names the file by device and inode,
// not by path: a binary replaced on disk while it runs is mapped as
// "path (deleted)".
func cleanSpans(r io.Reader, pc uintptr) ([]span, error) {
	var all []span
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if s, ok := parseSpan(line); ok {
			all = append(all, s)
			continue
		}
		if len(all) > 0 {
			all[len(all)-1].own += ownPages(line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read smaps: %w", err)
	}
	var dev, inode string
	for _, s := range all {
		if s.start <= pc && pc < s.end {
			dev, inode = s.dev, s.inode
		}
	}
	if inode == "" || inode == "0" {
		return nil, fmt.Errorf("read smaps: no file mapping holds %#x", pc)
	}
	var out []span
	for _, s := range all {
		if s.dev == dev && s.inode == inode && s.perms[1] == '-' && s.perms[3] == 'p' && s.own == 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

// ownPages is the kB of an smaps "Anonymous:  72 kB" or "Swap:  8 kB" line
// (a copied page swapped out is no longer Anonymous); 0 for any other line.
func ownPages(line string) int64 {
	key, rest, ok := strings.Cut(line, ":")
	if !ok || (key != "Anonymous" && key != "Swap") {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return 1 // unreadable: count the mapping as holding pages of its own
	}
	return n
}

// parseSpan reads a mapping's first line in /proc/PID/smaps (as in maps):
// "start-end perms offset dev inode [path]".
func parseSpan(line string) (span, bool) {
	f := strings.Fields(line)
	if len(f) < 5 || len(f[1]) != 4 {
		return span{}, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return span{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return span{}, false
	}
	return span{start: uintptr(start), end: uintptr(end), perms: f[1], dev: f[3], inode: f[4]}, true
}
