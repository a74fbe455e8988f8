package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The stream is a real `go test -json -count=2 -timeout 3s` of two packages:
// one with a passing, a skipped and a failing test and one that fails only in
// its first run, one whose test hangs until the timeout.
func TestReport_FailuresAndTheirLastLines(t *testing.T) {
	in, err := os.ReadFile("testdata/stream.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := newReport()
	var keep, live, sum bytes.Buffer
	if err := r.read(bytes.NewReader(in), &keep, &live); err != nil {
		t.Fatal(err)
	}
	r.summary(&sum, 3)
	if r.ok() {
		t.Error("ok() with failed tests")
	}
	if !bytes.Equal(keep.Bytes(), in) {
		t.Error("the stream kept differs from the stream read")
	}
	for _, want := range []string{"--- FAIL: example.com/demo/a TestFail", "FAIL\texample.com/demo/hang"} {
		if !strings.Contains(live.String(), want) {
			t.Errorf("live output lacks %q:\n%s", want, live.String())
		}
	}
	s := sum.String()
	for _, want := range []string{
		"=== FAILED example.com/demo/a TestFail ",
		"a_test.go:14: the last word",
		"=== FAILED example.com/demo/a TestFirstRunFails ", // its second run passed
		"=== DID NOT FINISH example.com/demo/hang TestHang",
		"hang_test.go:9: waiting for ever", // what led to the panic
		"panic: test timed out after 3s",   // and the panic
		"the 3 slowest tests:",
		"FAIL: 3 failed tests, 2 failed packages",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "line 0\n") {
		t.Errorf("summary holds TestFail's first lines, not only its last:\n%s", s)
	}
	if strings.Contains(s, "TestSkip") || strings.Contains(s, "FAILED example.com/demo/a TestPass") {
		t.Errorf("summary names a test that did not fail:\n%s", s)
	}
	// TestFail logs 50 lines, then its last word and its --- FAIL: the last
	// tailLines are 38 of its lines, in each of its two runs.
	if n := strings.Count(s, "a_test.go:12: line "); n != 2*(tailLines-2) {
		t.Errorf("summary holds %d of TestFail's lines, want %d", n, 2*(tailLines-2))
	}
}

func TestReport_PassingStreamIsOK(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}
{"Action":"output","Package":"p","Output":"ok  \tp\t1.6s\n"}
{"Action":"pass","Package":"p","Elapsed":1.6}
`
	r := newReport()
	var live, sum bytes.Buffer
	if err := r.read(strings.NewReader(in), &bytes.Buffer{}, &live); err != nil {
		t.Fatal(err)
	}
	r.summary(&sum, 10)
	if !r.ok() {
		t.Errorf("not ok:\n%s", sum.String())
	}
	if live.String() != "ok  \tp\t1.6s\n" {
		t.Errorf("live output %q", live.String())
	}
	if want := "\nthe 1 slowest tests:\n    1.50s  p TestA\n"; sum.String() != want {
		t.Errorf("summary %q, want %q", sum.String(), want)
	}
}
