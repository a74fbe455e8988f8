package plan

import (
	"bytes"
	"strconv"
	"strings"
)

// unclosedQuoteMsg is the end of yaml.v3's messages for a quoted value never
// closed: the file ends, or a document marker comes, inside it.
func unclosedQuoteMsg(msg string) bool {
	return strings.HasSuffix(msg, "found unexpected end of stream") || strings.HasSuffix(msg, "found unexpected document indicator")
}

// unclosedQuote finds the quote that opens the value yaml.v3 says, in msg, is
// never closed, as a byte offset in data; -1 when it cannot be told, or msg says
// something else. yaml.v3 names
// the line the quote opened on, but no column, and for a quote on the first
// line the line where the file ends: parsed again one line down, every quote
// is past the first line, and the line it names is the quote's.
func unclosedQuote(data []byte, msg string) int {
	if !unclosedQuoteMsg(msg) {
		return -1
	}
	_, err := readDocument(append([]byte{'\n'}, data...))
	if err == nil {
		return -1
	}
	m := yamlLineErr().FindStringSubmatch(err.Error())
	if m == nil || !unclosedQuoteMsg(m[2]) {
		return -1
	}
	line, _ := strconv.Atoi(m[1])
	start := lineStart(data, line-1)
	if start < 0 {
		return -1
	}
	end := len(data)
	if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
		end = start + i
	}
	// The value's quote is the first one on its line that opens a value
	// (after a space, a colon, a dash or a flow's bracket or comma) and runs
	// to the end of the file; an apostrophe inside a word is text.
	for i := start; i < end; i++ {
		c := data[i]
		if c == '#' && (i == start || data[i-1] == ' ') {
			break // a comment
		}
		if (c == '"' || c == '\'') && (i == start || strings.IndexByte(" \t:[{,-", data[i-1]) >= 0) && !quoteCloses(data, i) {
			return i
		}
	}
	return -1
}

// lineStart is the offset of the 1-based line n of data; -1 past its end.
func lineStart(data []byte, n int) int {
	at := 0
	for ; n > 1; n-- {
		i := bytes.IndexByte(data[at:], '\n')
		if i < 0 {
			return -1
		}
		at += i + 1
	}
	return at
}

// quoteCloses reports whether the quoted value opening at data[i] ends before
// the file does: a double quote not escaped by a backslash, or a single quote
// not doubled. A line that starts a new document (--- or ...) ends the search,
// as it ends yaml.v3's.
func quoteCloses(data []byte, i int) bool {
	q := data[i]
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case q == '"' && c == '\\':
			j++ // an escaped character
		case q == '\'' && c == '\'' && j+1 < len(data) && data[j+1] == '\'':
			j++ // '' is a quote inside single quotes
		case c == q:
			return true
		case c == '\n' && documentMarker(data[j+1:]):
			return false
		}
	}
	return false
}

// documentMarker reports whether line starts with a document's --- or ...
// followed by a blank or the end.
func documentMarker(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) && !bytes.HasPrefix(line, []byte("...")) {
		return false
	}
	return len(line) == 3 || strings.IndexByte(" \t\r\n", line[3]) >= 0
}
