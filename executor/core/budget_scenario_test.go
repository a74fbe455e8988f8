package core

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stepseq/stepseq/planspec"
)

// The scenario commands of spend and budgets:
//
//	exit a usage=IN/OUT/CACHE/COST   the try's usage, COST "-" for none
//	exit a usage-err=TEXT            a usage that did not read
//	budget [step=ID] usd=+2 …        `stepseq budget`
//	restart                          a new machine on the state last held
//	spend                            the run's and each step's spend
func init() {
	exit := scenarioInputs["exit"]
	scenarioInputs["exit"] = func(s *scenario, t *testing.T, d *datadriven.TestData) Input {
		in := exit(s, t, d).(AgentExited)
		if v := argOr(d, "usage", ""); v != "" {
			in.Usage = parseScenarioUsage(t, d, v)
			in.Agent = "claude"
		}
		in.Agent = argOr(d, "agent", in.Agent)
		in.UsageErr = argOr(d, "usage-err", "")
		return in
	}
	scenarioInputs["budget"] = func(s *scenario, _ *testing.T, d *datadriven.TestData) Input {
		var changes []string
		for _, a := range d.CmdArgs {
			if a.Key != "step" {
				changes = append(changes, a.Key+"="+strings.Join(a.Vals, ","))
			}
		}
		return TriggersIn{Triggers: []Trigger{{Step: argOr(d, "step", ""), From: "budget", At: planspec.FormatISO(s.now),
			Budget: strings.Join(changes, ",")}}}
	}
	scenarioInputs["restart"] = func(s *scenario, _ *testing.T, _ *datadriven.TestData) Input {
		st := s.m.State().Clone()
		s.m = NewMachine(s.m.Config())
		s.timer = time.Time{}
		return StateRead{State: st}
	}
}

func parseScenarioUsage(t *testing.T, d *datadriven.TestData, v string) *planspec.Usage {
	f := strings.Split(v, "/")
	if len(f) != 4 {
		d.Fatalf(t, "usage=%s: want IN/OUT/CACHE/COST", v)
	}
	var n [3]int64
	for i := range n {
		x, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			d.Fatalf(t, "usage=%s: %v", v, err)
		}
		n[i] = x
	}
	u := &planspec.Usage{Model: "m", InputTokens: n[0], OutputTokens: n[1], CacheTokens: n[2]}
	if f[3] != "-" {
		c, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			d.Fatalf(t, "usage=%s: %v", v, err)
		}
		u.CostUSD = &c
	}
	return u
}

// spendText prints what the state holds of spend and budgets.
func spendText(st *planspec.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run: %s; budget %s", st.Settings.Spend.Text(), st.Settings.Budget)
	if st.Settings.BudgetHeld != "" {
		fmt.Fprintf(&b, "; held: %s", st.Settings.BudgetHeld)
	}
	b.WriteString("\n")
	for _, id := range st.StepQueue {
		run := st.StepRuns[id]
		if run == nil || run.Agent == nil {
			continue
		}
		fmt.Fprintf(&b, "  %s: %s", id, run.Agent.Spend.Text())
		if sb := st.Steps[id].Budget; !sb.IsZero() {
			fmt.Fprintf(&b, "; budget %s", sb)
		}
		for _, u := range run.Agent.Usage {
			if u.Unknown {
				fmt.Fprintf(&b, "; #%d unknown", u.Try)
			} else {
				fmt.Fprintf(&b, "; #%d %d/%d/%d", u.Try, u.InputTokens, u.OutputTokens, u.CacheTokens)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
