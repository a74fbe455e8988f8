package exepages

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// span is one mapping of /proc/PID/maps.
type span struct {
	start, end uintptr
	perms      string
	dev, inode string
}

// readOnlySpans reads /proc/PID/maps and returns the read-only private
// mappings (code, read-only data) of the file mapped at pc. The mapping that
// holds pc names the file by device and inode, not by path: a binary replaced
// on disk while it runs is mapped as "path (deleted)".
func readOnlySpans(r io.Reader, pc uintptr) ([]span, error) {
	var all []span
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if s, ok := parseSpan(sc.Text()); ok {
			all = append(all, s)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps: %w", err)
	}
	var dev, inode string
	for _, s := range all {
		if s.start <= pc && pc < s.end {
			dev, inode = s.dev, s.inode
		}
	}
	if inode == "" || inode == "0" {
		return nil, fmt.Errorf("read maps: no file mapping holds %#x", pc)
	}
	var out []span
	for _, s := range all {
		if s.dev == dev && s.inode == inode && s.perms[1] == '-' && s.perms[3] == 'p' {
			out = append(out, s)
		}
	}
	return out, nil
}

// parseSpan reads a line of /proc/PID/maps: "start-end perms offset dev inode [path]".
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
