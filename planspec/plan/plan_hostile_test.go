package plan

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// allocated reports how many bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// endless is a reader that never ends, counting what was read from it.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n += len(p)
	return len(p), nil
}

// TestParsePlan_Hostile feeds ParsePlan what an attacker or a broken writer
// would: each is refused with an error, reading and allocating a bounded amount.
func TestParsePlan_Hostile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	deepBlock := func(n int) string {
		var b strings.Builder
		b.WriteString("vars:\n")
		for i := range n {
			fmt.Fprintf(&b, "%s k:\n", strings.Repeat(" ", i))
		}
		return b.String()
	}
	manyAliases := "vars:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n  b: [" + strings.Repeat("*a, ", 20_000) + "*a]\n"

	for _, tc := range []struct {
		name, input, want string
		maxAlloc          uint64
	}{
		{"over the size cap", strings.Repeat("# comment\n", MaxPlanSize/10+1), "larger than 8 MiB", 5 * MaxPlanSize},
		{"binary garbage", string(garbage), "binary data", 1 << 20},
		{"NUL in text", "steps: []\x00", "control character 0x00", 1 << 20},
		{"invalid UTF-8", "name: \xff\xfe\n", "invalid UTF-8", 1 << 20},
		{"deep flow nesting", "vars: " + strings.Repeat("[", MaxPlanSize-10), "invalid YAML", 256 << 20},
		{"deep flow mapping", "vars: " + strings.Repeat("{a: ", 200_000), "invalid YAML", 256 << 20},
		{"deep vars", "vars: {a: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}\nsteps: [{id: a, title: A, instruction: x}]\n", "vars nest deeper than 32 levels", 64 << 20},
		{"deep block nesting", deepBlock(1400), "vars nest deeper than 32 levels", 256 << 20},
		{"many aliases", manyAliases, "and 20000 more uses of *a", 256 << 20},
		{"a huge key", strings.Repeat("k", MaxPlanSize-10) + ": 1\n", "invalid YAML", 12 * MaxPlanSize},
		{"a huge quoted key", `"` + strings.Repeat("k", 1000) + `": 1` + "\n", `unknown key "kkk`, 64 << 20},
		{"only a document marker", "---\n", "empty plan", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = ParsePlan(strings.NewReader(tc.input), "hostile.yaml") })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %.300v, want an error containing %q", err, tc.want)
			}
			if n > tc.maxAlloc {
				t.Errorf("allocated %d MiB, want at most %d MiB", n>>20, tc.maxAlloc>>20)
			}
			if len(err.Error()) > 1<<20 {
				t.Errorf("error message of %d bytes", len(err.Error()))
			}
		})
	}
}

func TestParsePlan_ReadsAtMostTheCap(t *testing.T) {
	r := &endless{}
	_, err := ParsePlan(r, "endless.yaml")
	if err == nil || !strings.Contains(err.Error(), "endless.yaml:1:1: larger than 8 MiB") {
		t.Fatalf("got %v", err)
	}
	if r.n > MaxPlanSize+64<<10 {
		t.Errorf("read %d bytes from an endless reader, want about %d", r.n, MaxPlanSize)
	}
}

// TestParsePlan_ManyErrors: a plan with an error on every line reports a bounded
// number of them.
func TestParsePlan_ManyErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("steps:\n")
	for i := range maxPlanErrors {
		fmt.Fprintf(&b, "  - {id: 'bad id %d', titel: x}\n", i) // four errors each
	}
	_, err := ParsePlan(strings.NewReader(b.String()), "many.yaml")
	if err == nil {
		t.Fatal("want errors")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxPlanErrors+1 || !strings.Contains(lines[len(lines)-1], "more errors not shown") {
		t.Errorf("got %d lines ending %q", len(lines), lines[len(lines)-1])
	}
}

// TestParsePlan_Large: a 10,000-step plan with a condition on every other step
// validates (BenchmarkParsePlan10000 times it). The race detector, which makes
// parsing ten times slower, gets a tenth of it.
func TestParsePlan_Large(t *testing.T) {
	n := 10_000
	if raceEnabled {
		n = 1_000
	}
	data := generatedPlan(n)
	if len(data) > MaxPlanSize {
		t.Fatalf("the plan is %d bytes, over the cap", len(data))
	}
	if !raceEnabled && len(data) <= 1<<20 {
		t.Fatalf("the plan is %d bytes: it should be over the old 1 MiB cap", len(data))
	}
	p, err := ParsePlan(bytes.NewReader(data), "large.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != n || p.Steps[n-1].ID != fmt.Sprintf("step-%05d", n-1) {
		t.Errorf("got %d steps", len(p.Steps))
	}
	st := p.State("plans/large.yaml", Hash(data))
	if _, err := Compile(st); err != nil {
		t.Fatal(err)
	}
	if _, err := planspec.ParseState(bytes.NewReader(st.Marshal()), "state.json"); err != nil {
		t.Fatal(err)
	}
}

// leanPlan writes n short steps in flow style, so that 10,000 fit under the cap.
func leanPlan(n int) []byte {
	var b bytes.Buffer
	b.WriteString("name: lean\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: s%d, title: Step %d, instruction: write o/%d", i, i, i)
		if i%2 == 1 {
			fmt.Fprintf(&b, `, check: 'size("o/%d") > %d'`, i, i)
		}
		b.WriteString("}\n")
	}
	return b.Bytes()
}

var _ io.Reader = (*endless)(nil)

// TestParsePlan_DurationBound: a span longer than MaxDuration, or one that would
// overflow time.Duration, is refused where it is written, naming the bound.
func TestParsePlan_DurationBound(t *testing.T) {
	for _, tc := range []struct{ top, step, want string }{
		{"stepDelay: 9000h\n", "", `4:12: stepDelay: bad duration "9000h": longer than the longest span stepseq takes, 8760h (365 days)`},
		{"timeout: 2562048h\n", "", `4:10: timeout: bad duration "2562048h": longer than the longest span stepseq takes, 8760h (365 days)`},
		{"", "    awaitOutputs: 99999999999999h\n", `awaitOutputs: bad duration "99999999999999h": longer than the longest span stepseq takes, 8760h`},
		{"", "    timeout: 8761h\n", `timeout: bad duration "8761h": longer than`},
	} {
		src := "name: p\nsteps:\n  - {id: a, title: A, instruction: x}\n" + tc.top
		if tc.step != "" {
			src = "name: p\nsteps:\n  - id: a\n    title: A\n    instruction: x\n" + tc.step
		}
		_, err := ParsePlan(strings.NewReader(src), "p.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", src, err, tc.want)
		}
	}
	if _, err := ParsePlan(strings.NewReader("name: p\nstepDelay: 8760h\ntimeout: 1.5h\nsteps:\n  - {id: a, title: A, instruction: x}\n"), "p.yaml"); err != nil {
		t.Errorf("the bound itself: %v", err)
	}
	st := `{"plan":{"steps":{"a":{"title":"A","instruction":"x","timeout":"100000h"}}},"stepQueue":["a"]}`
	if _, err := planspec.ParseState(strings.NewReader(st), "state.json"); err == nil || !strings.Contains(err.Error(), "8760h (365 days)") {
		t.Errorf("a state's step timeout over the bound: got %v", err)
	}
}

// TestState_StepDelay: stepDelayMinutes, the original's plain number, is clamped to
// MaxDuration rather than overflowing into no delay, and the reason names the clamp.
func TestState_StepDelay(t *testing.T) {
	for _, tc := range []struct {
		minutes float64
		want    time.Duration
		clamped bool
	}{
		{0, 0, false}, {-1, 0, false}, {math.NaN(), 0, false},
		{1.5, 90 * time.Second, false},
		{525600, time.Duration(planspec.MaxDuration), false},
		{1e9, time.Duration(planspec.MaxDuration), true},
		{math.MaxFloat64, time.Duration(planspec.MaxDuration), true},
	} {
		st := &planspec.State{StepDelayMinutes: tc.minutes}
		d, clamped := st.StepDelay()
		if d != tc.want || clamped != tc.clamped {
			t.Errorf("%g minutes: got %v %v, want %v %v", tc.minutes, d, clamped, tc.want, tc.clamped)
		}
	}
	st := &planspec.State{StepDelayMinutes: 1e9}
	if r := st.StepDelayReason(); r != "stepDelayMinutes 1e+09, clamped to 525600 minutes (365 days), the longest delay stepseq takes" {
		t.Errorf("reason: %q", r)
	}
}
