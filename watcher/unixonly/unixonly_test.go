package unixonly

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// message is the name whose undefinedness is the Windows build's one message.
const message = "stepseq_runs_on_Linux_and_macOS__on_Windows_use_WSL"

// TestWindowsBuild_SaysUseWSL: a build for Windows, of every package and of
// the command, fails with one message, that stepseq runs on Linux and macOS
// and Windows wants WSL, and with none of the undefined syscall names the
// packages' Unix calls would give.
func TestWindowsBuild_SaysUseWSL(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	for _, args := range [][]string{{"build", "./..."}, {"build", "-o", filepath.Join(t.TempDir(), "stepseq.exe"), "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		text := string(out)
		switch {
		case err == nil:
			t.Errorf("GOOS=windows go %s built; want it to fail saying use WSL", strings.Join(args, " "))
		case !strings.Contains(text, message):
			t.Errorf("GOOS=windows go %s does not say use WSL:\n%s", strings.Join(args, " "), text)
		case strings.Contains(text, "syscall") || strings.Count(text, "undefined:") != 1 || strings.Count(text, "\n# ") > 0:
			t.Errorf("GOOS=windows go %s says more than the one message:\n%s", strings.Join(args, " "), text)
		}
	}
}
