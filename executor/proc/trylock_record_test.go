package proc

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A record's JSON means to encoding/json what json.Marshal's does, and
// parseRecord reads any text as json.Unmarshal does.
func TestTryRecord_JSON(t *testing.T) {
	t.Parallel()
	recs := []TryRecord{
		{},
		{Step: "step-001", Try: 1, Started: "2026-12-02T02:34:23.437Z"},
		{Step: "s", Try: 3, Started: "x", Began: 1764642863437000000, PID: 4242, StartTicks: 1 << 63, Pgid: 4242, Sid: 4242, Exited: true, Code: -1, Signal: "killed", TimedOut: true, Stopped: true},
		{Step: "a\"b\\c\n<&>\u2028é", Started: "\x00", Signal: "\xff"},
		{Step: "ünï", Try: -2, Code: 255},
	}
	for _, rec := range recs {
		got := rec.appendJSON(nil)
		var back, want TryRecord
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		wantJSON, _ := json.Marshal(rec)
		_ = json.Unmarshal(wantJSON, &want)
		if d := cmp.Diff(want, back); d != "" {
			t.Errorf("%s read back (-json.Marshal +appendJSON):\n%s", got, d)
		}
		if d := cmp.Diff(want, parseRecord(got)); d != "" {
			t.Errorf("parseRecord(%s) (-json +parseRecord):\n%s", got, d)
		}
	}
	texts := []string{
		"", "{}", "null", "[]", `{"step":"a"}`, `{"step":"a","try":01}`, `{"step":"a","try":1.5}`,
		`{"Step":"a","TRY":2}`, `{"step":"a","step":"b"}`, `{"step":"a" ,"try":1}`, `{"step":"a"}x`,
		`{"step":"a","pid":99999999999999999999}`, `{"startTicks":-1}`, `{"startTicks":18446744073709551615}`,
		`{"exited":true,"stopped":false,"timedOut":tru}`, `{"step":"\u0041","other":1}`, `{"step":"` + "\xff" + `"}`,
		`{"began":-5,"code":-0}`, `{"pgid":7,"sid":-1}`, `{"step":"a","try":1,"started":"b","code":0`, `{"signal":null,"try":2}`,
	}
	for _, text := range texts {
		var want TryRecord
		_ = json.Unmarshal([]byte(text), &want)
		if d := cmp.Diff(want, parseRecord([]byte(text))); d != "" {
			t.Errorf("parseRecord(%s) (-json.Unmarshal +parseRecord):\n%s", text, d)
		}
	}
}
