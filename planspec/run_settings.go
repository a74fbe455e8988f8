package planspec

// RunSettings are where a plan's default or a step's own setting goes, for the
// keys a step takes as the plan does: a step's overrides the
// plan's. A plan's YAML and a state's JSON read them here, the same keys into
// the same fields, at either place.
type RunSettings struct {
	Agent    *AgentSpec
	Fallback *[]string
	Reports  *string
	Sandbox  **Sandbox

	Timeout, LaunchTimeout, MilestoneTimeout, IdleTimeout, LimitWait *Duration
}

// RunSettings are the settings' run settings.
func (s *Settings) RunSettings() RunSettings {
	return RunSettings{&s.Agent, &s.Fallback, &s.Reports, &s.Sandbox, &s.Timeout, &s.LaunchTimeout, &s.MilestoneTimeout, &s.IdleTimeout, &s.LimitWait}
}

// RunSettings are the step's own run settings.
func (sp *StepSpec) RunSettings() RunSettings {
	return RunSettings{&sp.Agent, &sp.Fallback, &sp.Reports, &sp.Sandbox, &sp.Timeout, &sp.LaunchTimeout, &sp.MilestoneTimeout, &sp.IdleTimeout, &sp.LimitWait}
}

// runSettings reads those of the keys that object o (at prefix) has into r.
func (d *stateDecoder) runSettings(o object, prefix string, r RunSettings) {
	if raw, ok := o.vals["agent"]; ok {
		*r.Agent = d.agent(prefix+"agent", raw)
	}
	if raw, ok := o.vals["fallback"]; ok {
		*r.Fallback = d.fallback(prefix+"fallback", raw)
	}
	*r.Reports = d.oneOf(o, prefix, "reports", ReportsWords)
	if raw, ok := o.vals["sandbox"]; ok {
		*r.Sandbox = d.sandbox(prefix+"sandbox", raw)
	}
	*r.Timeout = d.optDuration(o, prefix, "timeout")
	*r.LaunchTimeout = d.optDuration(o, prefix, "launchTimeout")
	*r.MilestoneTimeout = d.optDuration(o, prefix, "milestoneTimeout")
	*r.IdleTimeout = d.optDuration(o, prefix, "idleTimeout")
	*r.LimitWait = d.optDuration(o, prefix, "limitWait")
}
