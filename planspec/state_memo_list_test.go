package planspec

import (
	"bytes"
	"slices"
	"testing"
)

// A remembered list writes what encoding/json's indentation of the whole list
// writes, whether it grew, shrank, changed in the middle or emptied.
func TestIndentedList(t *testing.T) {
	var l indentedList
	for _, list := range [][]string{
		nil,
		{"a.md"},
		{"a.md", "b \"quoted\".md"},
		{"a.md", "b \"quoted\".md", "c\u2028.md", "d/e.md"},
		{"a.md", "x.md", "c\u2028.md", "d/e.md"},
		{"a.md"},
		{},
		{"\xff.md", "f.md"},
	} {
		var p pieces
		p.cur.WriteString("{")
		l.write(&p, list)
		p.flush()
		want := "{" + string(indentAt(appendStrings(nil, list), 1))
		if got := string(bytes.Join(p.list, nil)); got != want {
			t.Errorf("%q:\n%s\nwant\n%s", list, got, want)
		}
	}
}

// A state whose artifacts grow by a step's outputs writes them all, and encodes
// as the state it writes does once parsed.
func TestState_ArtifactsGrow(t *testing.T) {
	st, err := ParseState(bytes.NewReader([]byte(handWrittenState)), "state.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{"study/summary.md", "paper/draft.md", "paper/figures"} {
		st.Artifacts = append(st.Artifacts, out)
		got := st.Marshal()
		fresh, err := ParseStateBytes(got, "state.json")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(fresh.Artifacts, st.Artifacts) {
			t.Fatalf("after %s the file holds artifacts %q", out, fresh.Artifacts)
		}
		if want := fresh.Marshal(); !bytes.Equal(got, want) {
			t.Fatalf("after %s:\n%s\nparsed and encoded again:\n%s", out, got, want)
		}
	}
}
