package store

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// What a face handed in with a plan file it wrote (MCP plan_submit) waits
// beside the plans' records, bound to the plan's content by its
// hash: the params a run of it takes (a plan in plans/ otherwise runs on its
// defaults) and the face it came through, which the run's state keeps
// (Settings.Face) and which bounds what its conditions read of the
// environment. An edit of the file (another hash) is the workspace owner's,
// and runs on its defaults again.

// Submission is the record of a plan a face submitted.
type Submission struct {
	Hash   string         `json:"hash"`
	Params map[string]any `json:"params,omitempty"`
	// Face is the face that wrote the plan file ("mcp"); "" for none.
	Face string `json:"face,omitempty"`
	// Client names the face's client that submitted it, for messages: the
	// name it gave and its session.
	Client string `json:"client,omitempty"`
}

func (w Workspace) planParamsPath(name string) string {
	return filepath.Join(w.PlansDir(), "params", name+".json")
}

// WriteSubmission records what plan name (its content's hash) was submitted
// with; a record with no face and no params is removed, so that the plan runs
// on its defaults.
func (w Workspace) WriteSubmission(name string, sub Submission) error {
	path := w.planParamsPath(name)
	if len(sub.Params) == 0 && sub.Face == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.Marshal(sub)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return renameio.WriteFile(path, data, 0o644)
}

// Submitted is what plan name was submitted with, when its content still has
// that hash; ok is false otherwise.
func (w Workspace) Submitted(name, hash string) (sub Submission, ok bool) {
	data, err := ReadFile(w.planParamsPath(name), RecordCap)
	if err != nil {
		return Submission{}, false
	}
	if json.Unmarshal(data, &sub) != nil || sub.Hash != hash {
		return Submission{}, false
	}
	return sub, true
}
