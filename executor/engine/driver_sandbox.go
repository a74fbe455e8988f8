package engine

import "github.com/stepseq/stepseq/executor/proc"

// launchDetail is the journal's record of a launch: the agent's pid, program and
// name, and whether it runs in a sandbox and with the network.
func launchDetail(pid int, spec proc.Spec, agent proc.Agent) map[string]any {
	d := map[string]any{"pid": pid, "argv0": spec.Argv[0], "agent": agent.Name()}
	if sb := spec.Sandbox; sb != nil {
		d["sandbox"] = true
		d["network"] = sb.Network
		if sb.Worktree != "" {
			d["worktree"] = sb.Worktree
		}
	}
	return d
}
