package planspec

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
)

// NotifySink is one entry of a plan's notify list: a command run for
// each report, never through a shell, or a webhook the report is posted to.
type NotifySink struct {
	Command []string `json:"command,omitempty"`
	Webhook string   `json:"webhook,omitempty"`
}

// Equal says whether s and o are the same sink: the same argv, or the same URL.
func (s NotifySink) Equal(o NotifySink) bool {
	return s.Webhook == o.Webhook && slices.Equal(s.Command, o.Command)
}

func (s NotifySink) Check() error {
	switch {
	case len(s.Command) > 0 && s.Webhook != "":
		return errors.New("a sink is either command or webhook, not both: split it in two entries")
	case len(s.Command) == 0 && s.Webhook == "":
		return errors.New("empty sink: want {command: [argv]} or {webhook: URL}")
	case s.Webhook != "":
		if err := CheckWebhook(s.Webhook); err != nil {
			return fmt.Errorf("webhook %q: %w", s.Webhook, err)
		}
	case s.Command[0] == "":
		return errors.New("command: the first element names the program to run")
	}
	return nil
}

// CheckWebhook says whether raw is a URL a report can be posted to: http or
// https, with a host. The plan's notify list, --notify-webhook and the notifier
// all hold a webhook to it.
func CheckWebhook(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http or https URL, like https://ntfy.sh/my-topic")
	}
	return nil
}
