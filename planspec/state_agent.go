package planspec

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// agent reads an "agent" member of state.json in any form a plan writes: an argv
// list, a preset name, or {"preset": NAME, "args": [...]}.
func (d *stateDecoder) agent(key string, raw json.RawMessage) AgentSpec {
	t := bytes.TrimSpace(raw)
	switch {
	case isNull(t):
		return AgentSpec{}
	case len(t) > 0 && t[0] == '[':
		return AgentSpec{Argv: d.strList(key, raw)}
	case len(t) > 0 && t[0] == '"':
		name := d.str(key, raw)
		if err := CheckPreset(name); err != nil {
			d.fail(key, "%v", err)
		}
		return AgentSpec{Preset: name}
	case len(t) > 0 && t[0] == '{':
		o, _ := d.object(key, raw)
		var a AgentSpec
		for _, k := range o.keys {
			switch k {
			case "preset":
				a.Preset = d.str(key+".preset", o.vals[k])
				if err := CheckPreset(a.Preset); err != nil {
					d.fail(key+".preset", "%v", err)
				}
			case "args":
				a.Args = d.strList(key+".args", o.vals[k])
			default:
				d.fail(key+"."+k, "unknown key: an agent preset has only preset and args")
			}
		}
		if _, ok := o.vals["preset"]; !ok {
			d.fail(key, `missing preset: want {"preset": NAME, "args": [...]}`)
		}
		return a
	}
	d.fail(key, `want the command as a list of strings, a preset name or {"preset": NAME, "args": [...]}, got %s`, describe(raw))
	return AgentSpec{}
}

// fallback reads a "fallback" member: a list of preset names.
func (d *stateDecoder) fallback(key string, raw json.RawMessage) []string {
	names := d.strList(key, raw)
	for i, name := range names {
		if err := CheckPreset(name); err != nil {
			d.fail(fmt.Sprintf("%s[%d]", key, i), "%v", err)
		}
	}
	return names
}
