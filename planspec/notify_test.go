package planspec

import (
	"strings"
	"testing"
)

// TestCheckWebhook: a report is posted to an http or https URL with a host;
// a plan's sink that is not one is refused, naming it.
func TestCheckWebhook(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://ntfy.sh/topic": true, "http://127.0.0.1:8080/hook?token=x": true,
		"ftp://example.com/x": false, "https://": false, "ntfy.sh/topic": false, "http://%zz": false,
	} {
		if err := CheckWebhook(raw); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
	src := "notify: [{webhook: ftp://example.com/x}]\nsteps:\n  - id: a\n    title: A\n    instruction: do a\n"
	_, err := ParsePlan(strings.NewReader(src), "n.yaml")
	if want := `n.yaml:1:10: webhook "ftp://example.com/x": want an http or https URL, like https://ntfy.sh/my-topic`; err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}
