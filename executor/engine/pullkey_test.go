package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stepseq/stepseq/executor/store"
)

// TestPullKey_MadeOnceKeptPrivate: the key is made with mode 0600, the same key
// is read back by every later call and by calls that race to make it, and a
// token signed before is verified by a launcher made after.
func TestPullKey_MadeOnceKeptPrivate(t *testing.T) {
	ws := store.Workspace{Dir: t.TempDir()}
	ws.State = filepath.Join(ws.Dir, "state.json")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := PullKey(ws)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for i, k := range keys {
		if len(k) != 32 || !bytes.Equal(k, keys[0]) {
			t.Fatalf("key %d = %x, want the one key %x", i, k, keys[0])
		}
	}
	path := filepath.Join(ws.Dir, store.MetaDir, "pull.key")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(ws.Dir, store.MetaDir, "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	token := NewPullLauncher(keys[0]).Token("find", 2)
	again, err := PullKey(ws)
	if err != nil {
		t.Fatal(err)
	}
	if id, try, err := NewPullLauncher(again).Verify(token); err != nil || id != "find" || try != 2 {
		t.Errorf("token from before: %s %d %v", id, try, err)
	}
	if _, _, err := NewPullLauncher(make([]byte, 32)).Verify(token); err == nil {
		t.Error("a token verified with another key")
	}
}

// TestPullKey_Refused: a key others may read, one that is not a key, and a link
// out of the workspace are refused, naming the file and the fix.
func TestPullKey_Refused(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(outside, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"readable by others", func(p string) error { return os.WriteFile(p, []byte(strings.Repeat("ab", 32)+"\n"), 0o644) }, "chmod 600"},
		{"not a key", func(p string) error { return os.WriteFile(p, []byte("hello\n"), 0o600) }, "not 64 hex digits"},
		{"link out", func(p string) error { return os.Symlink(outside, p) }, "out of the workspace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := store.Workspace{Dir: t.TempDir()}
			ws.State = filepath.Join(ws.Dir, "state.json")
			if err := os.MkdirAll(filepath.Join(ws.Dir, store.MetaDir), 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(ws.Dir, store.MetaDir, "pull.key")
			if err := tc.make(path); err != nil {
				t.Fatal(err)
			}
			_, err := PullKey(ws)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pull.key") {
				t.Errorf("err = %v, want one naming pull.key and containing %q", err, tc.want)
			}
		})
	}
}
