package store

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// The params a plan was submitted with (MCP plan_submit {params})
// wait beside the plans' records, bound to the plan's content by its
// hash, until the sidecar takes the plan in: a plan in plans/ otherwise runs
// on its defaults, and an edit of the file (another hash) runs on them again.

// submittedParams is the record of a submitted plan's params.
type submittedParams struct {
	Hash   string         `json:"hash"`
	Params map[string]any `json:"params"`
}

func (w Workspace) planParamsPath(name string) string {
	return filepath.Join(w.PlansDir(), "params", name+".json")
}

// WritePlanParams records the params plan name (its content's hash) was
// submitted with; none removes the record, so that the plan runs on its
// defaults.
func (w Workspace) WritePlanParams(name, hash string, params map[string]any) error {
	path := w.planParamsPath(name)
	if len(params) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.Marshal(submittedParams{Hash: hash, Params: params})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return renameio.WriteFile(path, data, 0o644)
}

// SubmittedParams are the params plan name was submitted with, when its
// content still has that hash; nil otherwise.
func (w Workspace) SubmittedParams(name, hash string) map[string]any {
	data, err := ReadFile(w.planParamsPath(name), RecordCap)
	if err != nil {
		return nil
	}
	var rec submittedParams
	if json.Unmarshal(data, &rec) != nil || rec.Hash != hash {
		return nil
	}
	return rec.Params
}
