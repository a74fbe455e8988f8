//go:build linux

package watcher

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkStepWatchSet: the watch set of a plan of n steps (two named outputs
// a step) changes by one path per step, as in the sidecar, where the running
// step's report folder replaces the last one's. Adjust is told the change;
// Update is given the whole sorted list, as a plan's watch set is. Each round
// times 1,000 steps (make bench runs one round); Adjust must cost what
// changed, not what the plan names.
func BenchmarkStepWatchSet(b *testing.B) {
	for _, n := range []int{100, 5000} {
		for _, how := range []string{"adjust", "update"} {
			b.Run(fmt.Sprintf("%s/%d", how, n), func(b *testing.B) { benchStepWatchSet(b, n, how == "adjust") })
		}
	}
}

func benchStepWatchSet(b *testing.B, n int, adjust bool) {
	const steps = 1000
	cfg := benchConfig(b.TempDir())
	for i := range n {
		cfg.Paths = append(cfg.Paths, fmt.Sprintf("out/s%04d/a.md", i), fmt.Sprintf("out/s%04d/b.md", i))
	}
	w, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	base := slices.Sorted(slices.Values(cfg.Paths))
	var last []string
	var took time.Duration
	rounds := 0
	for b.Loop() {
		start := time.Now()
		for i := range steps {
			dir := fmt.Sprintf(".stepseq/reports/s%04d", i%n)
			if adjust {
				err = w.Adjust([]string{dir}, last)
				last = []string{dir}
			} else {
				at, _ := slices.BinarySearch(base, dir)
				err = w.Update(slices.Insert(slices.Clip(base), at, dir), nil)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		took += time.Since(start)
		rounds++
	}
	b.ReportMetric(float64(took.Microseconds())/float64(rounds*steps), "µs/step")
}
