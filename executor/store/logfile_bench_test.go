package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepseq/stepseq/executor/core"
)

// BenchmarkTryLog_Write is an agent printing four times the log's cap in 32 KiB
// pieces: the head goes to disk, the rest through the tail ring.
func BenchmarkTryLog_Write(b *testing.B) {
	chunk := []byte(strings.Repeat("output of a chatty agent, line after line\n", 32<<10/42))
	const total = 4 * DefaultLogCap
	dir := b.TempDir()
	b.SetBytes(total)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		l := OpenTryLog(filepath.Join(dir, fmt.Sprint(i)+".log"), TryHeader{Step: "s", Try: 1, Argv: []string{"agent"}}, 0)
		for n := 0; n < total; n += len(chunk) {
			l.Write(chunk)
		}
		if err := l.Finish(core.Exit{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		fi, err := os.Stat(filepath.Join(dir, fmt.Sprint(i)+".log"))
		if err != nil || fi.Size() > DefaultLogCap+4<<10 {
			b.Fatalf("log size %v, %v: over the cap", fi.Size(), err)
		}
		os.Remove(filepath.Join(dir, fmt.Sprint(i)+".log"))
		b.StartTimer()
	}
}
