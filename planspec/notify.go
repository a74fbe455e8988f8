package planspec

import (
	"errors"
	"fmt"
	"net/url"
)

// NotifySink is one entry of a plan's notify list (DESIGN §8): a command run for
// each report, never through a shell, or a webhook the report is posted to.
type NotifySink struct {
	Command []string `json:"command,omitempty"`
	Webhook string   `json:"webhook,omitempty"`
}

func (s NotifySink) check() error {
	switch {
	case len(s.Command) > 0 && s.Webhook != "":
		return errors.New("a sink is either command or webhook, not both: split it in two entries")
	case len(s.Command) == 0 && s.Webhook == "":
		return errors.New("empty sink: want {command: [argv]} or {webhook: URL}")
	case s.Webhook != "":
		u, err := url.Parse(s.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("webhook %q: want an http or https URL, like https://ntfy.sh/my-topic", s.Webhook)
		}
	case s.Command[0] == "":
		return errors.New("command: the first element names the program to run")
	}
	return nil
}
