package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLI_StateFileNotAFile runs check, step and status on a state.json that is a
// FIFO, a directory or over the size cap: each exits 1 at once with a message that
// says what the file is, and none waits for a writer.
func TestCLI_StateFileNotAFile(t *testing.T) {
	cases := []struct {
		name, want string
		make       func(path string) error
	}{
		{"fifo", "state.json: not a regular file (a FIFO)", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"directory", "state.json is a folder, not a state file", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"huge", "state.json: 80 MiB is over the 64 MiB cap for a state file", func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(80 << 20)
		}},
	}
	t.Setenv("STEP_AGENT_CMD", "true")
	for _, c := range cases {
		for _, cmd := range []string{"check", "step", "status"} {
			t.Run(c.name+"/"+cmd, func(t *testing.T) {
				dir := t.TempDir()
				state := filepath.Join(dir, "state.json")
				if err := c.make(state); err != nil {
					t.Fatal(err)
				}
				arg := state
				if cmd == "status" {
					arg = dir
				}
				var stderr bytes.Buffer
				code := make(chan int, 1)
				go func() {
					err := run(context.Background(), []string{cmd, "--log-level", "error", arg}, io.Discard, io.Discard)
					code <- exitCode(err, &stderr)
				}()
				select {
				case got := <-code:
					if got != 1 {
						t.Errorf("exit %d, want 1", got)
					}
				case <-time.After(effectWait):
					t.Fatalf("stepseq %s blocked on a %s state.json", cmd, c.name)
				}
				if !strings.Contains(stderr.String(), c.want) {
					t.Errorf("stderr = %q, want it to say %q", stderr.String(), c.want)
				}
			})
		}
	}
}
