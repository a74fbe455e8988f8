package sandbox

import (
	"os/exec"
	"testing"
)

// BenchmarkLaunch is what the sandbox adds to an agent's launch: true run bare,
// and in the sandbox with and without the network, each started and waited for
// as the launcher does.
func BenchmarkLaunch(b *testing.B) {
	ws := tree(b, "src/main.go", "README.md", "state.json", ".stepseq/journal", "plans/p.yaml")
	run := func(b *testing.B, argv, env []string) {
		for b.Loop() {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = env
			cmd.SysProcAttr = SysProcAttr()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	}
	b.Run("bare", func(b *testing.B) {
		path, err := exec.LookPath("true")
		if err != nil {
			b.Fatal(err)
		}
		run(b, []string{path}, nil)
	})
	for _, c := range []struct {
		name    string
		network bool
	}{{"sandboxed", true}, {"sandboxed-no-network", false}} {
		b.Run(c.name, func(b *testing.B) {
			argv, env, err := Command(Spec{Workspace: ws, Network: c.network, ReportDir: ws + "/.stepseq/reports/s1", Argv: []string{"true"}})
			if err != nil {
				b.Fatal(err)
			}
			run(b, argv, env)
		})
	}
}
