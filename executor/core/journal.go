package core

// Entry is one self-describing journal record: what happened, why, to which step.
type Entry struct {
	Time   string         `json:"time"`
	Event  string         `json:"event"` // e.g. decide, launch, exit, write, trigger, plan
	Step   string         `json:"step,omitempty"`
	Try    int            `json:"try,omitempty"`
	Reason string         `json:"reason,omitempty"`
	Detail map[string]any `json:"detail,omitempty"`
}
