package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"
	"github.com/stepseq/stepseq/executor/core"
)

func (w Workspace) planRecordPath(name string) string {
	return filepath.Join(w.PlansDir(), name+".json")
}

// ReadPlanRecord reads a plan's record; ok is false when there is none.
func (w Workspace) ReadPlanRecord(name string) (core.PlanRecord, bool) {
	var rec core.PlanRecord
	data, err := ReadFile(w.planRecordPath(name), RecordCap)
	if err != nil || json.Unmarshal(data, &rec) != nil {
		return core.PlanRecord{}, false
	}
	return rec, true
}

// WritePlanRecord replaces a plan's record atomically.
func (w Workspace) WritePlanRecord(name string, rec core.PlanRecord) error {
	if err := os.MkdirAll(w.PlansDir(), 0o755); err != nil {
		return fmt.Errorf("plan record: %w", err)
	}
	data, _ := json.MarshalIndent(rec, "", "  ")
	data = append(data, '\n')
	path := w.planRecordPath(name)
	if err := renameio.WriteFile(path, data, 0o644, renameio.WithTempDir(w.PlansDir())); err != nil {
		return fmt.Errorf("plan record %s: %w", path, err)
	}
	return nil
}

// Archive keeps a state that a new plan replaces under .stepseq/history/, durably.
func (w Workspace) Archive(data []byte, name string) (string, error) {
	dir := w.HistoryDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("archive: %w", err)
	}
	if name == "" {
		name = "state"
	}
	path := filepath.Join(dir, time.Now().UTC().Format(ArchiveStamp)+"-"+name+".json")
	if err := renameio.WriteFile(path, data, 0o644, renameio.WithTempDir(dir)); err != nil {
		return "", fmt.Errorf("archive %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return "", err
	}
	return path, nil
}
