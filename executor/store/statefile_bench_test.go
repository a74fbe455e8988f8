package store

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hugeState writes a state.json of about size bytes that must be reported as
// broken: cut off before its end, or whole JSON with one bad field at the end.
func hugeState(tb testing.TB, size int, cut bool) string {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`{"plan":{"steps":{`)
	instruction := strings.Repeat("do the work ", 80)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"s%d":{"title":"Step %d","instruction":%q}`, i, i, instruction)
	}
	if !cut {
		b.WriteString(`}},"stepQueue":["s0"],"currentStep":0,"stepRuns":{"s0":{"status":"BOGUS"}},"blockers":[],"status":"IN_PROGRESS"}`)
	}
	path := filepath.Join(tb.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkStateFile_ReadBroken is a state.json that is not a state: how long it
// takes to be reported as broken, and what that costs in memory (bytes allocated
// over the file's size). 80 MB is over StateCap; the last case is the worst one
// the cap lets through.
func BenchmarkStateFile_ReadBroken(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
		cut  bool
	}{
		{"80MB-cut-off", 80 << 20, true},
		{"80MB-bad-field", 80 << 20, false},
		{"64MiB-bad-field", 64<<20 - 4<<10, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			sf := &StateFile{Path: hugeState(b, c.size, c.cut)}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := sf.Read(); err == nil {
					b.Fatal("a broken state was read")
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(c.size), "alloc/filesize")
		})
	}
}
