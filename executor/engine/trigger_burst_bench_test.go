package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// doneState is a two-step plan already DONE.
const doneState = `{"plan":{"steps":{"s1":{"title":"T1","instruction":"write:a"},"s2":{"title":"T2","instruction":"write:b"}}},` +
	`"stepQueue":["s1","s2"],"currentStep":2,"stepRuns":{"s1":{"status":"DONE","tries":1},"s2":{"status":"DONE","tries":1}},` +
	`"stepDelayMinutes":0,"blockers":[],"status":"DONE"}`

// BenchmarkTriggerBurst measures ten thousand triggers queued for one step: the
// longest turn of the sidecar's loop (how long it was busy at a stretch) and the
// time from the burst's end to the re-run's launch, queued before the start and
// Written while the sidecar runs.
func BenchmarkTriggerBurst(b *testing.B) {
	for _, live := range []bool{false, true} {
		name := "queued-before-start"
		if live {
			name = "written-while-running"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				dir := b.TempDir()
				state := filepath.Join(dir, "state.json")
				if err := os.WriteFile(state, []byte(doneState), 0o644); err != nil {
					b.Fatal(err)
				}
				rt, err := NewRuntime(state, nil)
				if err != nil {
					b.Fatal(err)
				}
				rt.Getenv = func(k string) string {
					if k == "STEP_AGENT_CMD" {
						return fakeAgentPath
					}
					return ""
				}
				if !live {
					queueBurst(b, rt.WS, "s1", burstSize)
				}
				sc, err := NewSidecar(rt, SidecarOptions{})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				stop := runBench(sc)
				if live {
					queueBurst(b, rt.WS, "s1", burstSize)
					start = time.Now()
				}
				journal := filepath.Join(dir, ".stepseq", "journal.jsonl")
				waitBench(b, func() bool {
					data, _ := os.ReadFile(journal)
					return strings.Contains(string(data), `"event":"launch","step":"s1"`)
				})
				launched := time.Since(start)
				stop()
				rt.Close()
				b.ReportMetric(float64(sc.LongestTurn().Microseconds())/1000, "longest-turn-ms")
				b.ReportMetric(float64(launched.Microseconds())/1000, "to-launch-ms")
			}
		})
	}
}
