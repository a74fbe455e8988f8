package planspec

import "gopkg.in/yaml.v3"

// runSettings are where a plan's default or a step's own setting goes, for the
// keys a step takes as the plan does: a step's overrides the
// plan's. A plan's YAML and a state's JSON read them here, the same keys into
// the same fields, at either place.
type runSettings struct {
	agent    *AgentSpec
	fallback *[]string
	reports  *string

	timeout, launchTimeout, milestoneTimeout, idleTimeout, limitWait *Duration
}

func (s *Settings) runSettings() runSettings {
	return runSettings{&s.Agent, &s.Fallback, &s.Reports, &s.Timeout, &s.LaunchTimeout, &s.MilestoneTimeout, &s.IdleTimeout, &s.LimitWait}
}

func (sp *StepSpec) runSettings() runSettings {
	return runSettings{&sp.Agent, &sp.Fallback, &sp.Reports, &sp.Timeout, &sp.LaunchTimeout, &sp.MilestoneTimeout, &sp.IdleTimeout, &sp.LimitWait}
}

// runSetting reads key into r when it is one of those keys; false when not.
func (d *planDecoder) runSetting(r runSettings, key string, v *yaml.Node, f string) bool {
	switch key {
	case "agent":
		*r.agent = d.agent(v, f)
	case "fallback":
		*r.fallback = d.fallback(v, f)
	case "reports":
		*r.reports = d.oneOf(v, f, reportsWords)
	case "timeout":
		*r.timeout = d.duration(v, f)
	case "launchTimeout":
		*r.launchTimeout = d.duration(v, f)
	case "milestoneTimeout":
		*r.milestoneTimeout = d.duration(v, f)
	case "idleTimeout":
		*r.idleTimeout = d.duration(v, f)
	case "limitWait":
		*r.limitWait = d.duration(v, f)
	default:
		return false
	}
	return true
}

// runSettings reads those of the keys that object o (at prefix) has into r.
func (d *stateDecoder) runSettings(o object, prefix string, r runSettings) {
	if raw, ok := o.vals["agent"]; ok {
		*r.agent = d.agent(prefix+"agent", raw)
	}
	if raw, ok := o.vals["fallback"]; ok {
		*r.fallback = d.fallback(prefix+"fallback", raw)
	}
	*r.reports = d.oneOf(o, prefix, "reports", reportsWords)
	*r.timeout = d.optDuration(o, prefix, "timeout")
	*r.launchTimeout = d.optDuration(o, prefix, "launchTimeout")
	*r.milestoneTimeout = d.optDuration(o, prefix, "milestoneTimeout")
	*r.idleTimeout = d.optDuration(o, prefix, "idleTimeout")
	*r.limitWait = d.optDuration(o, prefix, "limitWait")
}
