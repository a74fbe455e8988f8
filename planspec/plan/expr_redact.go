package plan

import (
	"strings"
	"unicode/utf8"
)

// envRedacted stands where an evaluation error would have shown what env() gave.
const envRedacted = "[env]"

// minEnvFragment is the shortest piece of an env() value that is masked wherever it
// appears in an error: a condition can slice a secret (int(env("K")[0:4])) and the
// error then prints the slice. A shorter value is masked wherever it appears whole,
// a one-character value only where it stands as a word.
const minEnvFragment = 3

// redactedError is an evaluation error whose text no longer shows env() values. It
// keeps the error it stands for, so errors.Is still matches the sentinels.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactEnv masks in err's text every value env() gave during the evaluation.
// Evaluation errors go to state.json, status, MCP, the journal and the log; the
// environment holds tokens, so none of it may reach them.
func redactEnv(err error, values []string) error {
	if len(values) == 0 {
		return err
	}
	ce, ok := err.(*ConditionError)
	if !ok {
		msg := maskEnv(err.Error(), values)
		if msg == err.Error() {
			return err
		}
		return &redactedError{msg: msg, err: err}
	}
	msg := maskEnv(ce.Msg, values)
	if msg == ce.Msg {
		return err
	}
	out := *ce
	out.Msg = msg
	if ce.Err != nil {
		out.Err = &redactedError{msg: maskEnv(ce.Err.Error(), values), err: ce.Err}
	}
	return &out
}

// maskEnv replaces in s every run of at least minEnvFragment bytes that is part of
// one of values, and every occurrence of a shorter one.
func maskEnv(s string, values []string) string {
	var b strings.Builder
	last := 0 // s[:last] is decided
	for i := 0; i < len(s); {
		n := 0
		for _, v := range values {
			if m := envRun(s, i, v); m > n {
				n = m
			}
		}
		if n == 0 {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(envRedacted)
		i += n
		last = i
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// envRun is how many bytes of s from i are to be masked for value v: the longest
// run, ending on a rune boundary, that occurs in v when it is at least
// minEnvFragment long, or all of v when v is shorter and found there (standing as
// a word, for a single character).
func envRun(s string, i int, v string) int {
	if v == "" {
		return 0
	}
	if len(v) < minEnvFragment {
		if strings.HasPrefix(s[i:], v) && (len(v) > 1 || (i == 0 || !wordByte(s, i-1)) && !wordByte(s, i+len(v))) {
			return len(v)
		}
		return 0
	}
	s = s[i:]
	n := 0
	for end := minEnvFragment; end <= len(s) && end <= len(v); end++ {
		if !strings.Contains(v, s[:end]) {
			break
		}
		if utf8.RuneStart(byteAt(s, end)) {
			n = end
		}
	}
	return n
}

// wordByte reports whether s[i] continues a word (a letter, digit or underscore).
func wordByte(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf
}

// byteAt is s[i], or a rune start past the end.
func byteAt(s string, i int) byte {
	if i >= len(s) {
		return 0
	}
	return s[i]
}
