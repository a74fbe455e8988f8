package planspec

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Sandbox is a plan's or step's `sandbox:` setting: `sandbox: true`, `false`, or
// {network, write, read, env}. A step's setting replaces the plan's whole.
type Sandbox struct {
	// On: the agent runs in a sandbox; false only for an explicit `sandbox: false`.
	On bool
	// NoNetwork is `network: false`: an empty network namespace. The default keeps
	// the host's network, since agent CLIs reach their model's API.
	NoNetwork bool
	// Write are more writable paths, Read paths shown read-only where the sandbox
	// would hide them, Env the names of the variables the agent may see.
	Write, Read, Env []string
}

// SandboxOn is `sandbox: true`.
var SandboxOn = &Sandbox{On: true}

// Clone is a copy of s sharing nothing with it; nil stays nil.
func (s *Sandbox) Clone() *Sandbox {
	if s == nil {
		return nil
	}
	c := *s
	c.Write, c.Read, c.Env = slices.Clone(s.Write), slices.Clone(s.Read), slices.Clone(s.Env)
	return &c
}

// Equal reports whether s and o say the same; nil is unset.
func (s *Sandbox) Equal(o *Sandbox) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.On == o.On && s.NoNetwork == o.NoNetwork && slices.Equal(s.Write, o.Write) &&
		slices.Equal(s.Read, o.Read) && slices.Equal(s.Env, o.Env)
}

// plain: the setting is a bare true or false.
func (s *Sandbox) plain() bool {
	return !s.On || !s.NoNetwork && len(s.Write) == 0 && len(s.Read) == 0 && len(s.Env) == 0
}

// MarshalJSON writes true or false when that says it all, else the mapping.
func (s *Sandbox) MarshalJSON() ([]byte, error) {
	if s.plain() {
		return json.Marshal(s.On)
	}
	o := map[string]any{"network": !s.NoNetwork}
	if len(s.Write) > 0 {
		o["write"] = s.Write
	}
	if len(s.Read) > 0 {
		o["read"] = s.Read
	}
	if len(s.Env) > 0 {
		o["env"] = s.Env
	}
	return json.Marshal(o)
}

// String is how status and validate name the setting: "sandboxed", with what it
// adds ("no network, write: out/"), or "not sandboxed".
func (s *Sandbox) String() string {
	if s == nil || !s.On {
		return "not sandboxed"
	}
	var more []string
	if s.NoNetwork {
		more = append(more, "no network")
	}
	for _, l := range []struct {
		name string
		v    []string
	}{{"write", s.Write}, {"read", s.Read}, {"env", s.Env}} {
		if len(l.v) > 0 {
			more = append(more, l.name+": "+strings.Join(l.v, " "))
		}
	}
	if len(more) == 0 {
		return "sandboxed"
	}
	return "sandboxed (" + strings.Join(more, ", ") + ")"
}

// SandboxKeys are the keys of a `sandbox:` mapping.
var SandboxKeys = []string{"network", "write", "read", "env"}

// CheckSandboxEnv says why name cannot be an `env:` entry of a sandbox.
func CheckSandboxEnv(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00 \t\n") {
		return fmt.Errorf("%q is not a variable's name", name)
	}
	if strings.HasPrefix(name, "STEPSEQ_") {
		return fmt.Errorf("%s: stepseq sets its own STEPSEQ_ variables", name)
	}
	return nil
}

// CheckSandboxPath says why p cannot be a `write:` or `read:` path of a sandbox.
func CheckSandboxPath(p string) error {
	if strings.TrimSpace(p) == "" {
		return fmt.Errorf("empty path")
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("%q holds a NUL byte", p)
	}
	return nil
}

// SandboxFor is step id's own setting, else the plan's; nil when neither says.
func (s *State) SandboxFor(id string) *Sandbox {
	if sp := s.Steps[id]; sp != nil && sp.Sandbox != nil {
		return sp.Sandbox
	}
	return s.Settings.Sandbox
}

// sandbox reads a state's `sandbox` member: true, false or the mapping.
func (d *stateDecoder) sandbox(key string, raw json.RawMessage) *Sandbox {
	if isNull(raw) {
		return nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return &Sandbox{On: b}
	}
	o, ok := d.object(key, raw)
	if !ok {
		return nil
	}
	sb := &Sandbox{On: true}
	if n, ok := d.optBool(o, key+".", "network"); ok {
		sb.NoNetwork = !n
	}
	if v, ok := o.vals["write"]; ok {
		sb.Write = d.strList(key+".write", v)
	}
	if v, ok := o.vals["read"]; ok {
		sb.Read = d.strList(key+".read", v)
	}
	if v, ok := o.vals["env"]; ok {
		sb.Env = d.strList(key+".env", v)
	}
	return sb
}
