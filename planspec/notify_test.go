package planspec

import (
	"testing"
)

// TestCheckWebhook: a report is posted to an http or https URL with a host.
func TestCheckWebhook(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://ntfy.sh/topic": true, "http://127.0.0.1:8080/hook?token=x": true,
		"ftp://example.com/x": false, "https://": false, "ntfy.sh/topic": false, "http://%zz": false,
	} {
		if err := CheckWebhook(raw); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
