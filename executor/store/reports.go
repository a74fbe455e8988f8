package store

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReportsRel is the workspace-relative folder of step id's reports in the
// workspace's own run; Workspace.ReportsRel is a run's.
func ReportsRel(id string) string { return Workspace{}.ReportsRel(id) }

// ReportsRel is the workspace-relative folder of step id's reports in this run;
// Workspace.ReportsDir is the same folder, absolute.
func (w Workspace) ReportsRel(id string) string { return w.runMetaRel() + "/reports/" + safeName(id) }

// ReportsStep is the step whose report folder holds the workspace path p, if any:
// safeName undone.
func (w Workspace) ReportsStep(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, w.runMetaRel()+"/reports/")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "/")
	if dots, ok := strings.CutPrefix(name, "_"); ok && strings.Trim(dots, ".") == "" {
		name = dots // the prefix safeName puts before a name of dots
	}
	id, err := url.PathUnescape(name)
	return id, err == nil && name != ""
}

// ReportFile reports whether a name in a report folder is a report to read.
func ReportFile(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".rejected") || strings.HasSuffix(name, ".why") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json", ".txt", ".md":
		return true
	}
	return false
}

// ReportTry reads the try a report file names: "<try>-anything.yaml".
func ReportTry(name string) (int, bool) {
	head, _, ok := strings.Cut(name, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(head)
	return n, err == nil && n > 0
}

// RefuseReportFile renames a refused report <file>.rejected with <file>.why beside it.
func RefuseReportFile(path string, reasons []string) {
	_ = os.WriteFile(path+".why", []byte(strings.Join(reasons, "\n")+"\n"), 0o644)
	_ = os.Rename(path, path+".rejected")
}

// ReportsDir is the step's report folder, .stepseq/reports/<step>/.
func (w Workspace) ReportsDir(step string) string {
	return filepath.Join(w.Dir, filepath.FromSlash(w.ReportsRel(step)))
}
