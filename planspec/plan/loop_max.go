package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stepseq/stepseq/planspec"
)

// LoopMax evaluates g's max with what the state knows (params, vars, runs): a
// whole number from 1 to MaxRounds.
func LoopMax(s *planspec.State, g *planspec.Group) (int, error) {
	src := strings.TrimSpace(g.Max)
	if n, err := strconv.Atoi(src); err == nil {
		return checkRounds(float64(n))
	}
	c, err := compileTemplateExpr(src)
	if err != nil {
		return 0, fmt.Errorf("max %q: %w", planspec.Clip(src, 60), err)
	}
	v, err := c.evalValue(&Env{Runs: s.StepRuns, Vars: s.Settings.Vars, Params: s.Settings.Params, Totals: s.Totals()})
	if err != nil {
		return 0, fmt.Errorf("max %q: %w", planspec.Clip(src, 60), err)
	}
	var f float64
	switch v := v.(type) {
	case int:
		f = float64(v)
	case float64:
		f = v
	default:
		return 0, fmt.Errorf("max %q gave %s: want a whole number of rounds", planspec.Clip(src, 60), describeValue(v))
	}
	return checkRounds(f)
}

func checkRounds(f float64) (int, error) {
	if f != math.Trunc(f) || f < 1 || f > planspec.MaxRounds {
		return 0, fmt.Errorf("max gave %v: want a whole number of rounds from 1 to %d", f, planspec.MaxRounds)
	}
	return int(f), nil
}
