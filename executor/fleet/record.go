package fleet

import (
	"encoding/json"
	"fmt"
	"time"
)

// A run's status in the fleet.
const (
	StatusQueued  = "queued"  // on the queue, no worker holds it
	StatusRunning = "running" // a worker holds it
	StatusDone    = "done"
	StatusBlocked = "blocked" // a step ran out of tries, or the fleet could not run it: Reason says which
	StatusClosed  = "closed"
)

// ended reports whether a run of this status is over: its message is acked
// and only a retry puts it on the queue again.
func ended(status string) bool {
	return status == StatusDone || status == StatusBlocked || status == StatusClosed
}

// Job is the message a run waits as on the queue.
type Job struct {
	ID     string         `json:"id"`  // this submission's id; a record of another id is another run
	Run    string         `json:"run"` // the run's name, and its branch stepseq/RUN
	Plan   []byte         `json:"plan"`
	File   string         `json:"file"` // the plan's file name, for the state's source
	Repo   string         `json:"repo"`
	Branch string         `json:"branch"`
	Params map[string]any `json:"params,omitempty"`
	// Retry is the step a retry of a blocked run gives a new try, "" for none.
	Retry string `json:"retry,omitempty"`
}

// Record is a run's entry in the bucket: what the fleet knows of it. The
// worker that holds the run writes it by revision; a write that finds another
// revision is a lease lost.
type Record struct {
	ID      string    `json:"id"`
	Run     string    `json:"run"`
	Plan    string    `json:"plan"`
	Repo    string    `json:"repo"`
	Branch  string    `json:"branch"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"` // why it is blocked
	Worker  string    `json:"worker,omitempty"`
	Attempt int       `json:"attempt,omitempty"` // how many times a worker took it
	Step    string    `json:"step,omitempty"`
	Phase   string    `json:"phase,omitempty"`
	Done    int       `json:"done"`
	Steps   int       `json:"steps"`
	Commit  string    `json:"commit,omitempty"` // the last commit pushed to stepseq/RUN
	Updated time.Time `json:"updated"`
	// Renewed is when the holder last renewed its lease.
	Renewed time.Time `json:"renewed,omitzero"`
	// Spend is the state's spend, when it records one.
	Spend json.RawMessage `json:"spend,omitempty"`
	// State is the run's newest state.json, verbatim.
	State json.RawMessage `json:"state,omitempty"`
	// Job is the run as submitted, for a retry to queue it again.
	Job *Job `json:"job,omitempty"`
	// Budget are the changes to the run's budget given while no worker held
	// it: the next holder makes them through its engine and drops them with
	// the first write of its state, which holds them.
	Budget []BudgetOrder `json:"budget,omitempty"`
}

func decodeRecord(data []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return Record{}, fmt.Errorf("a run record that is not JSON: %w", err)
	}
	return r, nil
}

// Control is a command for a run's worker, in the bucket under a key of its
// own (ControlKeys).
type Control struct {
	Close  bool         `json:"close,omitempty"`
	Retry  string       `json:"retry,omitempty"` // the step to give a new try
	Answer *GateAnswer  `json:"answer,omitempty"`
	Budget *BudgetOrder `json:"budget,omitempty"`
	By     string       `json:"by,omitempty"`
	At     time.Time    `json:"at"`
}

// BudgetOrder is a change to what a run may spend, as stepseq budget gives
// it, which a worker gives its engine as stepseq budget does.
type BudgetOrder struct {
	Step    string   `json:"step,omitempty"` // "": the bound that holds the run, else the run's
	Changes []string `json:"changes"`        // like usd=+2, tries=40
	By      string   `json:"by,omitempty"`
}

// GateAnswer is a person's yes or no to a gate of a running run, which its
// worker gives as stepseq approve or reject does.
type GateAnswer struct {
	Step    string `json:"step,omitempty"` // "": the gate that waits
	Approve bool   `json:"approve"`
	Note    string `json:"note,omitempty"`
}
