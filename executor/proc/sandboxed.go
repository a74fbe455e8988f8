package proc

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stepseq/stepseq/executor/proc/sandbox"
	"github.com/stepseq/stepseq/executor/store"
	"github.com/stepseq/stepseq/planspec"
)

// ErrSandbox is matched by every error that keeps a sandboxed agent from
// starting: the try fails with it, and no other agent runs the try bare.
var ErrSandbox = errors.New("sandbox")

// sandboxError is a start refused by the sandbox: its reason and fix, as the
// sandbox package says them.
type sandboxError struct{ err error }

func (e sandboxError) Error() string        { return e.err.Error() }
func (e sandboxError) Unwrap() []error      { return []error{ErrSandbox, e.err} }
func (e sandboxError) Is(target error) bool { return target == ErrSandbox }

// presetSandbox is what a preset's CLI needs in a sandbox: its own config
// folders, writable, and the variables it reads (API keys, its config's place).
type presetSandbox struct {
	dirs []string
	env  []string
	// dirVars name variables that move a config folder: when set, the folder
	// they name is writable instead.
	dirVars map[string]string
}

// proxyVars reach every sandboxed agent that has them: without them an agent
// behind a proxy cannot reach its model's API.
var proxyVars = []string{"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"}

var presetSandboxes = map[string]presetSandbox{
	"claude": {dirs: []string{"~/.claude"},
		env:     []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_OAUTH_TOKEN"},
		dirVars: map[string]string{"CLAUDE_CONFIG_DIR": "~/.claude"}},
	"codex": {dirs: []string{"~/.codex"},
		env:     []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"},
		dirVars: map[string]string{"CODEX_HOME": "~/.codex"}},
	"gemini": {dirs: []string{"~/.gemini"},
		env: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS"}},
	"opencode": {dirs: []string{"~/.config/opencode", "~/.local/share/opencode", "~/.cache/opencode"},
		env: []string{"OPENCODE_CONFIG", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"}},
}

// PresetConfigDirs are the config folders preset's CLI writes, made writable in
// its sandbox; none for a preset stepseq knows no folder of.
func PresetConfigDirs(preset string) []string {
	return slices.Clone(presetSandboxes[preset].dirs)
}

// UnattendedEdit reports whether preset edits files without asking (claude's
// acceptEdits, codex's workspace-write, gemini's yolo, aider's --yes-always…):
// run without a sandbox, only its prompt keeps it in the workspace.
func UnattendedEdit(preset string) bool {
	return preset != "" && preset != planspec.AgentMCP && slices.ContainsFunc(presets, func(p Preset) bool { return p.Name == preset })
}

// SandboxTry is one try's place, for its sandbox.
type SandboxTry struct {
	WS      store.Workspace
	Step    string
	Try     int
	Changed []string
	Agent   Agent
	// Outputs are the step's required outputs: the top folder of each is made
	// writable (and made) before the agent starts, since the agent cannot make
	// an entry at the workspace's top.
	Outputs []string
}

// InSandbox puts spec in the sandbox sb asks for: its environment becomes only
// what stepseq tells the agent (the preset's and sb's variables pass through the
// sandbox), and Start runs it under bubblewrap. The agent works in spec.Dir: a
// folder other than the workspace is its worktree, the workspace then read-only.
func InSandbox(spec Spec, sb *planspec.Sandbox, t SandboxTry) Spec {
	ws := t.WS
	if real, err := filepath.EvalSymlinks(ws.Dir); err == nil && real != ws.Dir {
		// The agent sees the paths bwrap mounts: the ones links resolve to.
		ws.State = filepath.Join(real, filepath.Base(ws.State))
		ws.Dir = real
	}
	spec.Env = AgentEnv(nil, t.Step, t.Try, ws, t.Changed)
	ps := presetSandboxes[t.Agent.Preset]
	s := &sandbox.Spec{Workspace: ws.Dir, ReportDir: ws.ReportsDir(t.Step),
		Write: slices.Clone(sb.Write), Read: slices.Clone(sb.Read), Network: !sb.NoNetwork,
		Env: append(append(slices.Clone(ps.env), proxyVars...), sb.Env...)}
	if dir, err := filepath.EvalSymlinks(spec.Dir); err == nil && spec.Dir != "" && dir != ws.Dir {
		s.Worktree = dir
	}
	for _, d := range ps.dirs {
		s.PresetDirs = append(s.PresetDirs, movedDir(d, ps.dirVars))
	}
	s.PresetDirs = slices.Compact(s.PresetDirs)
	if t.Agent.Preset == "claude" && os.Getenv("CLAUDE_CONFIG_DIR") == "" {
		// claude keeps its settings in ~/.claude.json too, beside its folder.
		if home, err := os.UserHomeDir(); err == nil {
			if fi, err := os.Stat(filepath.Join(home, ".claude.json")); err == nil && fi.Mode().IsRegular() {
				s.Write = append(s.Write, filepath.Join(home, ".claude.json"))
			}
		}
	}
	if s.Worktree == "" {
		s.Write = append(s.Write, outputFolders(t.Outputs)...)
	}
	spec.Sandbox = s
	return spec
}

// movedDir is def, or the folder a variable that moves it names.
func movedDir(def string, vars map[string]string) string {
	for name, d := range vars {
		if d == def {
			if v := os.Getenv(name); v != "" && filepath.IsAbs(v) {
				return v
			}
		}
	}
	return def
}

// outputFolders are the top folders of the outputs that lie in one, each once.
// A top-level file cannot be made by a sandboxed agent; protected names (plans,
// .stepseq) stay read-only and are left out.
func outputFolders(outputs []string) []string {
	var out []string
	for _, o := range outputs {
		o = path.Clean(filepath.ToSlash(o))
		top, rest, ok := strings.Cut(o, "/")
		if !ok || rest == "" || top == ".." || top == "." || path.IsAbs(o) {
			continue
		}
		if slices.ContainsFunc(sandbox.DefaultProtected, func(p string) bool { ok, _ := path.Match(p, top); return ok }) {
			continue
		}
		if !slices.Contains(out, top) {
			out = append(out, top)
		}
	}
	return out
}

// probed is set once a sandbox ran here: a machine that could make one can
// again, so later launches skip the probe. A failed probe is not kept: the
// operator may install bwrap while stepseq runs.
var probed struct {
	sync.Mutex
	ok bool
}

// probeTimeout bounds the probe: a bwrap that hangs must not hold the launch.
var probeTimeout = 30 * time.Second

// command is how Start runs spec: its argv, environment and process attributes;
// under bubblewrap when spec has a sandbox. A sandbox that cannot be had is an
// error matching ErrSandbox, with its reason and fix: never a bare run.
func command(spec Spec) (argv, env []string, attr *syscall.SysProcAttr, err error) {
	if spec.Sandbox == nil {
		return spec.Argv, spec.Env, &syscall.SysProcAttr{Setpgid: true}, nil
	}
	sb := *spec.Sandbox
	sb.Argv = spec.Argv
	sb.BaseEnv = spec.Env
	if err := probe(sb); err != nil {
		return nil, nil, nil, sandboxError{err}
	}
	argv, env, err = sandbox.Command(sb)
	if err != nil {
		return nil, nil, nil, sandboxError{err}
	}
	return argv, env, sandbox.SysProcAttr(), nil
}

func probe(sb sandbox.Spec) error {
	probed.Lock()
	defer probed.Unlock()
	if probed.ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if err := sandbox.Probe(ctx, sb); err != nil {
		return err
	}
	probed.ok = true
	return nil
}

// sandboxSignal reads the exit of a sandboxed agent: bwrap ends with 128+N for
// an agent a signal N ended, which a bare agent's wait status says as the signal.
func sandboxSignal(code int) (syscall.Signal, bool) {
	if code > 128 && code < 128+65 {
		return syscall.Signal(code - 128), true
	}
	return 0, false
}
