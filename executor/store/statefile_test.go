package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepseq/stepseq/executor/core"
	"github.com/stepseq/stepseq/planspec"
)

// writerStates are the two contents the writer process alternates between.
func writerStates() [2][]byte {
	a := chainState(50, false)
	b := chainState(50, false)
	for _, id := range b.StepQueue {
		msg := "a long error to make the two files differ in size " + id
		b.Run(id).Status = planspec.StatusFailed
		b.Run(id).Error = &msg
	}
	return [2][]byte{a.Marshal(), b.Marshal()}
}

// stateWriter replaces path with the two states in turn, forever, and reports each
// completed write on stdout, until it is killed.
func stateWriter(path string) int {
	states := writerStates()
	sf := &StateFile{Path: path}
	for i := 0; ; i++ {
		if err := sf.WriteBytes(states[i%2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(i)
	}
}

// TestStateFile_KillNineMidWrite kills a writer at many instants: the file is always
// the old content or the new one, never a mix, and always parses.
func TestStateFile_KillNineMidWrite(t *testing.T) {
	states := writerStates()
	exe := testBinary(t)
	for round := range 15 {
		dir := t.TempDir()
		path := filepath.Join(dir, "state.json")
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "STEPSEQ_TEST_WRITER="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let a different number of writes complete each round, then kill while the
		// writer is in the middle of the next ones.
		lines := bufio.NewScanner(out)
		for range 1 + round*3 {
			if !lines.Scan() {
				t.Fatalf("writer ended early: %v", cmd.Wait())
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, states[0]) && !bytes.Equal(got, states[1]) {
			t.Fatalf("round %d: the file is neither the old nor the new content (%d bytes)", round, len(got))
		}
		if _, err := planspec.ParseState(bytes.NewReader(got), path); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStateFile_Write(t *testing.T) {
	t.Run("keeps the mode", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := (&StateFile{Path: path}).Write(planspec.NewState()); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
		}
	})
	t.Run("refuses a symlink", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "real.json")
		if err := os.WriteFile(target, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "state.json")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		err := (&StateFile{Path: link}).Write(planspec.NewState())
		if !errors.Is(err, ErrSymlink) {
			t.Fatalf("err = %v, want ErrSymlink", err)
		}
		if got, _ := os.ReadFile(target); string(got) != "{}" {
			t.Errorf("target written through the link: %s", got)
		}
	})
	t.Run("two-space indentation and a stable round trip", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		st := chainState(2, false)
		sf := &StateFile{Path: path}
		if err := sf.Write(st); err != nil {
			t.Fatal(err)
		}
		first, _ := os.ReadFile(path)
		if !bytes.HasPrefix(first, []byte("{\n  \"plan\": {\n    \"steps\": {\n      \"step-000\": {\n")) {
			t.Errorf("not two-space indented:\n%s", first)
		}
		again, err := sf.Read()
		if err != nil {
			t.Fatal(err)
		}
		if second := again.Marshal(); !bytes.Equal(first, second) {
			t.Errorf("round trip changed the file:\n%s\n---\n%s", first, second)
		}
	})
	t.Run("replaces a large file, written in chunks, then a FIFO put in its place, without blocking", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		sf := &StateFile{Path: path}
		for _, c := range []byte("ab") {
			data := bytes.Repeat([]byte{c}, max(freeLaterFrom, 2*writebackChunk)+1) // in chunks, the last one short
			if err := sf.WriteBytes(data); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Fatalf("after the write of %q: %d bytes, not the ones written", c, len(got))
			}
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := sf.WriteBytes([]byte("{}")); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("the FIFO is not replaced: %v, %v", fi, err)
		}
	})
}

func TestWorkspace_LogPathStaysUnderLogs(t *testing.T) {
	ws := Workspace{Dir: "/ws"}
	for _, id := range []string{"build", "../../etc/x", "..", ".", "a/b", "c d"} {
		got := ws.LogPath(id, 2)
		rel, err := filepath.Rel("/ws/.stepseq/logs", got)
		if err != nil || !filepath.IsLocal(rel) || filepath.Dir(rel) == "." || strings.Contains(filepath.Dir(rel), "/") {
			t.Errorf("LogPath(%q) = %s: not one folder under logs/", id, got)
		}
	}
	if got := ws.LogPath("build", 2); got != "/ws/.stepseq/logs/build/2.log" {
		t.Errorf("LogPath(build) = %s", got)
	}
}

func TestJournal_RotatesPastMax(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j := &Journal{Path: path, Max: 1024}
	defer j.Close()
	for i := range 100 {
		if err := j.Record(core.Entry{Event: "decide", Step: "s", Try: i, Reason: "a reason long enough to fill the journal"}); err != nil {
			t.Fatal(err)
		}
	}
	cur, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.Stat(path + ".1")
	if err != nil {
		t.Fatalf("no rotated journal: %v", err)
	}
	if cur.Size() > 1024 || old.Size() > 1024 {
		t.Errorf("sizes %d and %d exceed the 1024-byte bound", cur.Size(), old.Size())
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"try":99`) {
		t.Error("the newest record is not in the current journal")
	}
}

// A journal held keeps its records until Flush appends them, whole lines in
// the order they came; after Flush, and after Close, records go at once.
func TestJournal_HoldFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j := &Journal{Path: path}
	defer j.Close()
	if err := j.Record(core.Entry{Event: "first"}); err != nil {
		t.Fatal(err)
	}
	j.Hold()
	for _, ev := range []string{"start", "state-read", "decide"} {
		if err := j.Record(core.Entry{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	events := func() []string {
		data, _ := os.ReadFile(path)
		var out []string
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			var e core.Entry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			out = append(out, e.Event)
		}
		return out
	}
	if got := events(); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("held: the journal holds %q, want only the record before Hold", got)
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := j.Record(core.Entry{Event: "after"}); err != nil {
		t.Fatal(err)
	}
	if got, want := events(), []string{"first", "start", "state-read", "decide", "after"}; !slices.Equal(got, want) {
		t.Fatalf("flushed: %q, want %q", got, want)
	}
	j.Hold()
	if err := j.Record(core.Entry{Event: "at-close"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if got := events(); got[len(got)-1] != "at-close" {
		t.Fatalf("closed: %q, want the held record written", got)
	}
}

// ReadIfChanged tells this process's own write by stat alone, and any other write
// by what it changed: an in-place rewrite of the same size at once after the write
// (same inode, same size, the same coarse clock tick), a replacement by rename, a
// touch that changes nothing.
func TestStateFile_ReadIfChanged(t *testing.T) {
	write := func(t *testing.T) (*StateFile, []byte) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "state.json")
		sf := &StateFile{Path: path}
		if err := sf.Write(chainState(3, false)); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		return sf, data
	}
	// same is data with one title changed, at the same length.
	same := func(data []byte) []byte {
		return bytes.Replace(data, []byte(`"Step step-001"`), []byte(`"Step step-00X"`), 1)
	}
	t.Run("its own write, unread", func(t *testing.T) {
		sf, _ := write(t)
		if sf.written.ino == 0 {
			t.Fatal("the write's stamp was not kept: every echo would be read and compared")
		}
		fi, _ := os.Stat(sf.Path)
		if age := time.Since(fi.ModTime()); age < stampAge || age > stampAge+time.Minute {
			t.Errorf("modification time %v ago, want the stamp, %v in the past", age, stampAge)
		}
		if _, changed, err := sf.ReadIfChanged(); err != nil || changed {
			t.Errorf("changed = %v, err = %v; want its own write, unchanged", changed, err)
		}
	})
	t.Run("rewritten in place at once, same size", func(t *testing.T) {
		sf, data := write(t)
		f, err := os.OpenFile(sf.Path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(same(data)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		st, changed, err := sf.ReadIfChanged()
		if err != nil || !changed || st.Steps["step-001"].Title != "Step step-00X" {
			t.Fatalf("changed = %v, err = %v; want the rewrite read", changed, err)
		}
	})
	t.Run("replaced by rename, same size", func(t *testing.T) {
		sf, data := write(t)
		tmp := sf.Path + ".new"
		if err := os.WriteFile(tmp, same(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, sf.Path); err != nil {
			t.Fatal(err)
		}
		if _, changed, err := sf.ReadIfChanged(); err != nil || !changed {
			t.Fatalf("changed = %v, err = %v; want the replacement read", changed, err)
		}
	})
	t.Run("written in pieces, touched, then one byte changed", func(t *testing.T) {
		sf := &StateFile{Path: filepath.Join(t.TempDir(), "state.json")}
		if err := sf.Write(chainState(2000, true)); err != nil {
			t.Fatal(err)
		}
		if len(sf.last) < 2 {
			t.Fatalf("a 2,000-step state written in %d piece(s): want its plan kept as a piece of its own", len(sf.last))
		}
		now := time.Now()
		if err := os.Chtimes(sf.Path, now, now); err != nil {
			t.Fatal(err)
		}
		if _, changed, err := sf.ReadIfChanged(); err != nil || changed {
			t.Fatalf("changed = %v, err = %v; want the same bytes seen as unchanged", changed, err)
		}
		data, _ := os.ReadFile(sf.Path)
		data = bytes.Replace(data, []byte(`"Step step-1999"`), []byte(`"Step step-199X"`), 1)
		if err := os.WriteFile(sf.Path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		st, changed, err := sf.ReadIfChanged()
		if err != nil || !changed || st.Steps["step-1999"].Title != "Step step-199X" {
			t.Fatalf("changed = %v, err = %v; want the change read", changed, err)
		}
	})
	// Another writer's file: a read that found its change time settled is
	// not read again while stat finds it as it was; one read within the
	// settle window is, and a rewrite at once, same size, is seen.
	other := func(t *testing.T) (*StateFile, []byte) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "state.json")
		data := chainState(3, false).Marshal()
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return &StateFile{Path: path}, data
	}
	rewrite := func(t *testing.T, path string, data []byte) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("another's write read at once, rewritten at once, same size", func(t *testing.T) {
		for range 20 {
			sf, data := other(t)
			if _, changed, err := sf.ReadIfChanged(); err != nil || !changed {
				t.Fatalf("first read: changed = %v, err = %v", changed, err)
			}
			rewrite(t, sf.Path, same(data))
			st, changed, err := sf.ReadIfChanged()
			if err != nil || !changed || st.Steps["step-001"].Title != "Step step-00X" {
				t.Fatalf("changed = %v, err = %v; want the rewrite read", changed, err)
			}
		}
	})
	t.Run("another's settled write, read once, then rewritten in place, same size", func(t *testing.T) {
		sf, data := other(t)
		waitSettled(t, sf.Path)
		if _, changed, err := sf.ReadIfChanged(); err != nil || !changed {
			t.Fatalf("first read: changed = %v, err = %v", changed, err)
		}
		if sf.seen.ino == 0 {
			t.Fatal("a settled file's stat was not kept: every look would read it again")
		}
		if st, changed, err := sf.ReadIfChanged(); err != nil || changed || st != nil {
			t.Fatalf("second look: changed = %v, err = %v; want unchanged", changed, err)
		}
		rewrite(t, sf.Path, same(data))
		st, changed, err := sf.ReadIfChanged()
		if err != nil || !changed || st.Steps["step-001"].Title != "Step step-00X" {
			t.Fatalf("changed = %v, err = %v; want the rewrite read", changed, err)
		}
	})
	t.Run("touched, same bytes", func(t *testing.T) {
		sf, _ := write(t)
		now := time.Now()
		if err := os.Chtimes(sf.Path, now, now); err != nil {
			t.Fatal(err)
		}
		if _, changed, err := sf.ReadIfChanged(); err != nil || changed {
			t.Fatalf("changed = %v, err = %v; want the same bytes seen as unchanged", changed, err)
		}
	})
}

// waitSettled waits until the file's change time lies readSettle in the past.
func waitSettled(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(effectWait); ; {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if id := settledIdent(fi, time.Now()); id.ino != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: its change time never settled (a file system with coarse times?)", path)
		}
		time.Sleep(time.Millisecond)
	}
}

// Preread hands its state to the next ReadIfChanged when the file is as it read
// it, once; a file changed since is parsed anew, and a write drops the state.
func TestStateFile_Preread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	data := chainState(3, false).Marshal()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sf := &StateFile{Path: path}
	pre, err := sf.Preread()
	if err != nil {
		t.Fatal(err)
	}
	if st, changed, err := sf.ReadIfChanged(); err != nil || !changed || st != pre {
		t.Fatalf("first read: changed %v, err %v, same state %v; want Preread's state, changed", changed, err, st == pre)
	}
	if st, changed, err := sf.ReadIfChanged(); err != nil || changed || st != nil {
		t.Fatalf("second read: changed %v, err %v; want unchanged", changed, err)
	}

	if _, err := sf.Preread(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(`"Step step-001"`), []byte(`"Step step-00X"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, changed, err := sf.ReadIfChanged(); err != nil || !changed || st == pre || st.Steps["step-001"].Title != "Step step-00X" {
		t.Fatalf("after a change: changed %v, err %v; want the new content parsed", changed, err)
	}

	if _, err := sf.Preread(); err != nil {
		t.Fatal(err)
	}
	st := chainState(3, false)
	if err := sf.Write(st); err != nil {
		t.Fatal(err)
	}
	if got, changed, err := sf.ReadIfChanged(); err != nil || changed || got != nil {
		t.Fatalf("after its own write: changed %v, err %v; want unchanged, the preread state dropped", changed, err)
	}
}

// TestStateFile_ReadHoldsTheFileOnce: a read allocates the file's bytes once
// and parses them where they lie, not from a copy (a 50 MB state held twice is
// 50 MB more at the sidecar's peak): the bytes, and the strings decoded from
// them, about as many again.
func TestStateFile_ReadHoldsTheFileOnce(t *testing.T) {
	st := planspec.NewState()
	for i := range 200 {
		id := fmt.Sprintf("step-%03d", i)
		st.Steps[id] = &planspec.StepSpec{Title: id, Instruction: strings.Repeat("Read the notes and cite them. ", 700)}
		st.StepQueue = append(st.StepQueue, id)
	}
	path := filepath.Join(t.TempDir(), "state.json")
	data := st.Marshal()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := (&StateFile{Path: path}).Read()
	runtime.ReadMemStats(&after)
	if err != nil || len(got.Steps) != 200 {
		t.Fatalf("read: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(data))*3 {
		t.Fatalf("reading a %d-byte state allocated %d bytes: the file is held more than once", len(data), alloc)
	}
}

// largeState writes a state of about 4 MB, mostly long instructions, and
// returns its path and content.
func largeState(t *testing.T) (string, []byte) {
	t.Helper()
	st := planspec.NewState()
	for i := range 200 {
		id := fmt.Sprintf("step-%03d", i)
		st.Steps[id] = &planspec.StepSpec{Title: id, Instruction: strings.Repeat("Read the notes and cite them. ", 700)}
		st.StepQueue = append(st.StepQueue, id)
	}
	path := filepath.Join(t.TempDir(), "state.json")
	data := st.Marshal()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// allocated is what fn allocates, in bytes.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestStateFile_ReadSharesLongStrings: a state's long strings share the bytes
// read, so a read allocates little more than the file.
func TestStateFile_ReadSharesLongStrings(t *testing.T) {
	path, data := largeState(t)
	var got *planspec.State
	alloc := allocated(func() { got, _ = (&StateFile{Path: path}).Read() })
	if got == nil || len(got.Steps) != 200 {
		t.Fatal("the state did not read")
	}
	if limit := uint64(len(data)) * 3 / 2; alloc > limit {
		t.Fatalf("reading a %d-byte state allocated %d bytes, over %d: its strings are copies", len(data), alloc, limit)
	}
}

// TestStateFile_EchoHoldsNoCopy: telling an echo of a large state, whose
// stat cannot be trusted (it was just written), does not read it whole.
func TestStateFile_EchoHoldsNoCopy(t *testing.T) {
	path, data := largeState(t)
	sf := &StateFile{Path: path}
	if _, err := sf.Preread(); err != nil {
		t.Fatal(err)
	}
	sf.seen = fileIdent{} // as when the file changed within readSettle of the read
	var changed bool
	var err error
	alloc := allocated(func() { _, changed, err = sf.ReadIfChanged() })
	if err != nil || !changed {
		t.Fatalf("changed %v, err %v; want the preread state handed on", changed, err)
	}
	if limit := uint64(len(data)) / 8; alloc > limit {
		t.Fatalf("telling an echo of a %d-byte state allocated %d bytes, over %d", len(data), alloc, limit)
	}
	sf.seen = fileIdent{}
	if _, changed, err = sf.ReadIfChanged(); err != nil || changed {
		t.Fatalf("the echo again: changed %v, err %v; want unchanged", changed, err)
	}
}
