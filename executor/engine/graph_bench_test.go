package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
	planpkg "github.com/stepseq/stepseq/planspec/plan"
)

// runToDone runs a sidecar with --exit-when-done on the state at path, its
// agent agent, and returns the wall time and this process's CPU it took.
func runToDone(b *testing.B, path, agent string, maxAgents int) (wall, cpu time.Duration) {
	b.Helper()
	rt, err := NewRuntime(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	rt.Getenv = func(k string) string {
		if k == "STEP_AGENT_CMD" {
			return agent
		}
		return ""
	}
	start, c := time.Now(), selfCPU()
	sc, err := NewSidecar(rt, SidecarOptions{ExitWhenDone: true, MaxAgents: maxAgents})
	if err != nil {
		b.Fatal(err)
	}
	if err := sc.Run(b.Context()); err != nil {
		b.Fatal(err)
	}
	wall, cpu = time.Since(start), selfCPU()-c
	if st, err := (&store.StateFile{Path: path}).Read(); err != nil || st.Status != planspec.StatusDone {
		b.Fatalf("the plan did not finish: %v", err)
	}
	return wall, cpu
}

// planState writes the state of a YAML plan to dir/state.json.
func planState(b *testing.B, dir, yaml string) string {
	b.Helper()
	p, err := planpkg.ParsePlan(strings.NewReader(yaml), "p.yaml")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, p.State("p.yaml", "h").Marshal(), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkGraphFanOut runs ten branches of an agent that sleeps 1 s, with
// maxParallel 10 (and --max-agents 10): the launches overlap, so the plan ends
// in about the time of one branch (wall-s ≤ 1.5), where a straight line takes
// 10 s or more.
func BenchmarkGraphFanOut(b *testing.B) {
	var y strings.Builder
	y.WriteString("maxParallel: 10\nsteps:\n")
	for i := range 10 {
		fmt.Fprintf(&y, "  - {id: b%d, title: B%d, instruction: 'sleep:1s', needs: []}\n", i, i)
	}
	var wall time.Duration
	for b.Loop() {
		w, _ := runToDone(b, planState(b, b.TempDir(), y.String()), fakeAgentPath, 10)
		wall += w
	}
	s := wall.Seconds() / float64(b.N)
	b.ReportMetric(s, "wall-s")
	if s > 1.5 {
		b.Errorf("ten 1 s branches side by side took %.2f s, over 1.5 s", s)
	}
}

// BenchmarkForeach100 runs a foreach of 100 instances of `true` side by side
// (--max-agents 10) and a 100-step chain of `true`, both under the sidecar:
// the cost per instance beside the cost per step (wall and this process's
// CPU), and the size of each one's state file once DONE.
func BenchmarkForeach100(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal("no true on PATH")
	}
	var chain strings.Builder
	chain.WriteString("steps:\n")
	for i := range 100 {
		fmt.Fprintf(&chain, "  - {id: s%03d, title: S%d, instruction: 'step %d of the chain'}\n", i, i, i)
	}
	foreach := "steps:\n  - id: fix\n    foreach: 0..99\n    title: Fix ${item}\n    instruction: 'fix item ${item} of the list'\n"
	var fw, fc, cw, cc time.Duration
	var fsize, csize int64
	for b.Loop() {
		dir := b.TempDir()
		w, c := runToDone(b, planState(b, dir, foreach), truePath, 10)
		fw, fc = fw+w, fc+c
		fsize = fileSize(b, filepath.Join(dir, "state.json"))
		dir = b.TempDir()
		w, c = runToDone(b, planState(b, dir, chain.String()), truePath, 10)
		cw, cc = cw+w, cc+c
		csize = fileSize(b, filepath.Join(dir, "state.json"))
	}
	n := float64(b.N) * 100
	b.ReportMetric(float64(fw.Microseconds())/n, "foreach-µs/instance")
	b.ReportMetric(float64(fc.Microseconds())/n, "foreach-cpu-µs/instance")
	b.ReportMetric(float64(cw.Microseconds())/n, "chain-µs/step")
	b.ReportMetric(float64(cc.Microseconds())/n, "chain-cpu-µs/step")
	b.ReportMetric(float64(fsize), "foreach-state-bytes")
	b.ReportMetric(float64(csize), "chain-state-bytes")
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// BenchmarkWorktreeMerge fans ten branches out over worktrees, each writing a
// file of its own, and joins them: stepseq's time per branch (make the
// worktree, run the agent there, judge, commit, remove, merge at the join)
// beside, on a repository of the same shape, a bare git worktree add, a
// commit, a git merge and a git worktree remove per branch.
func BenchmarkWorktreeMerge(b *testing.B) {
	const n = 10
	var y strings.Builder
	y.WriteString("worktree: true\nmaxParallel: 10\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&y, "  - {id: b%d, title: B%d, instruction: 'put:f%d.txt=%d', requiredOutputs: [f%d.txt], needs: []}\n", i, i, i, i, i)
	}
	y.WriteString("  - {id: join, title: Join, instruction: 'put:join.txt=done', worktree: false}\n")
	var sw, bare time.Duration
	for b.Loop() {
		dir := b.TempDir()
		benchRepo(b, dir)
		path := planState(b, dir, y.String())
		w, _ := runToDone(b, path, fakeAgentPath, 10)
		sw += w

		dir = b.TempDir()
		benchRepo(b, dir)
		start := time.Now()
		for i := range n {
			wt := filepath.Join(dir, ".stepseq", "wt", fmt.Sprint(i))
			benchGit(b, dir, "worktree", "add", "-q", "-b", fmt.Sprintf("b%d", i), wt)
			if err := os.WriteFile(filepath.Join(wt, fmt.Sprintf("f%d.txt", i)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
			benchGit(b, wt, "add", "-A")
			benchGit(b, wt, "commit", "-q", "-m", "work")
			benchGit(b, dir, "worktree", "remove", "--force", wt)
		}
		for i := range n {
			benchGit(b, dir, "merge", "-q", "--no-ff", "--no-edit", fmt.Sprintf("b%d", i))
		}
		bare += time.Since(start)
	}
	per := float64(b.N) * n
	b.ReportMetric(float64(sw.Milliseconds())/per, "stepseq-ms/branch")
	b.ReportMetric(float64(bare.Milliseconds())/per, "bare-git-ms/branch")
}

// benchRepo makes dir a git repository with one commit, stepseq's files ignored.
func benchRepo(b *testing.B, dir string) {
	b.Helper()
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("state*.json\n.state*\n.stepseq/\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	benchGit(b, dir, "init", "-q", "-b", "main")
	benchGit(b, dir, "config", "user.email", "bench@example.com")
	benchGit(b, dir, "config", "user.name", "bench")
	benchGit(b, dir, "add", "-A")
	benchGit(b, dir, "commit", "-q", "-m", "base")
}

func benchGit(b *testing.B, dir string, args ...string) {
	b.Helper()
	if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
