package planspec

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Statuses are the status words of a state file: the plan's and each step
// run's, all that pruning old runs and logs needs to know of it.
type Statuses struct {
	Status string            // the state's: IN_PROGRESS or DONE
	Runs   map[string]string // each step run's status, by step id
}

// ReadStatuses reads the statuses of a state file as it streams by, holding
// neither the file nor its parse: a reader beside a sidecar that holds the
// same state would otherwise hold it a second time. name is used in messages.
// It checks no more of the file than it reads: a file ParseState refuses may
// still give its statuses. A state without a status is IN_PROGRESS, a run
// without one PENDING, as ParseState reads them.
func ReadStatuses(r io.Reader, name string) (Statuses, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(io.LimitReader(r, MaxStateSize+1), 64<<10))
	st := Statuses{Status: StatusInProgress, Runs: map[string]string{}} // as ParseState reads a state without one
	err := eachMember(dec, func(key string) error {
		switch key {
		case "status":
			return stringValue(dec, &st.Status)
		case "stepRuns":
			return eachMember(dec, func(id string) error {
				st.Runs[id] = StatusPending // as ParseState reads a run without one
				return eachMember(dec, func(key string) error {
					if key != "status" {
						return skipValue(dec)
					}
					s := StatusPending
					err := stringValue(dec, &s)
					st.Runs[id] = s
					return err
				})
			})
		}
		return skipValue(dec)
	})
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = errors.New("cut off before its end")
		}
		return Statuses{}, &StateError{File: name, Msg: fmt.Sprintf("not a state file: %v", err)}
	}
	return st, nil
}

// eachMember reads an object, calling member with each key, the decoder then
// before the key's value, which member must read; null is an empty object.
func eachMember(dec *json.Decoder, member func(key string) error) error {
	t, err := dec.Token()
	if err != nil || t == nil {
		return err
	}
	if t != json.Delim('{') {
		return fmt.Errorf("want an object, got %v", t)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		if err := member(k.(string)); err != nil {
			return err
		}
	}
	_, err = dec.Token() // the closing brace
	return err
}

// stringValue reads a string into s; a value of another kind is skipped and
// leaves s as it was.
func stringValue(dec *json.Decoder, s *string) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := t.(type) {
	case string:
		*s = t
	case json.Delim:
		return skipRest(dec, 1)
	}
	return nil
}

// skipValue reads the next value, a token at a time: a large one is never
// held whole.
func skipValue(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); ok && (d == '{' || d == '[') {
		return skipRest(dec, 1)
	}
	return nil
}

// skipRest reads up to the end of the depth containers open.
func skipRest(dec *json.Decoder, depth int) error {
	for depth > 0 {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}
