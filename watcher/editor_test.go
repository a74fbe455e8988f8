package watcher

import (
	"os"
	"path"
	"testing"
)

func TestScratch(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{".x.md.swp", true},
		{".x.md.swo", true},
		{".x.md.swx", true},
		{"x.md~", true},
		{"4913", true},
		{"5036", true},
		{"#x.md#", true},
		{".#x.md", true},
		{"x.md___jb_tmp___", true},
		{"x.md___jb_old___", true},
		{".state.json.tmp123", true},
		{"state.json.tmp", true},
		{"x.tmp.42", true},
		{".state.json4818104381183071021", true}, // renameio
		{".goutputstream-AB12CD", true},
		{"x.md.kate-swp", true},

		{"x.md", false},
		{"state.json", false},
		{"page.tmpl", false},
		{"4914", false},
		{"2024", false},
		{"report-2024", false},
		{".env", false},
		{".bashrc2", false},
		{"main.swift", false},
		{"#", false},
		{"##", false},
		{"notes.swf", false},
	}
	for _, tt := range tests {
		if got := scratch(tt.name); got != tt.want {
			t.Errorf("scratch(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestWatcher_EditorSave: every way an editor saves a file yields a batch
// with the file's real name, and none of its scratch files.
func TestWatcher_EditorSave(t *testing.T) {
	const x = "notes/x.md"
	saves := []struct {
		name string
		save func(h *harness)
	}{
		{"plain write", func(h *harness) { h.write(x, "v2") }},
		{"truncate then write", func(h *harness) {
			f, err := os.OpenFile(h.abs(x), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				h.t.Fatal(err)
			}
			if _, err := f.WriteString("v2"); err != nil {
				h.t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				h.t.Fatal(err)
			}
		}},
		{"rename into place", func(h *harness) {
			h.write("notes/.x.md.tmp4711", "v2")
			h.rename("notes/.x.md.tmp4711", x)
		}},
		{"renameio", func(h *harness) {
			h.write("notes/.x.md8674665223082153551", "v2")
			h.rename("notes/.x.md8674665223082153551", x)
		}},
		{"vim with backupcopy=no", func(h *harness) {
			h.write("notes/.x.md.swx", "") // probing for the swap file
			h.remove("notes/.x.md.swx")
			h.write("notes/.x.md.swp", "swap")
			h.write("notes/4913", "") // may it write the directory?
			h.remove("notes/4913")
			h.rename(x, x+"~") // the original becomes the backup
			h.write(x, "v2")
			h.remove(x + "~")
			h.remove("notes/.x.md.swp")
		}},
		{"emacs", func(h *harness) {
			if err := os.Symlink("user@host.1234", h.abs("notes/.#x.md")); err != nil {
				h.t.Fatal(err)
			}
			h.write("notes/#x.md#", "auto-save")
			h.rename(x, x+"~")
			h.write(x, "v2")
			h.remove("notes/#x.md#")
			h.remove("notes/.#x.md")
		}},
		{"JetBrains safe write", func(h *harness) {
			h.write(x+"___jb_tmp___", "v2")
			h.rename(x, x+"___jb_old___")
			h.rename(x+"___jb_tmp___", x)
			h.remove(x + "___jb_old___")
		}},
	}
	modes := []struct {
		name string
		cfg  Config
	}{
		{"path", Config{Paths: []string{x, "notes/sentinel"}}},
		{"tree", Config{Trees: []string{"notes"}}},
	}
	for _, m := range modes {
		for _, s := range saves {
			t.Run(m.name+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				h := watch(t, m.cfg, func(h *harness) { h.write(x, "v1") })
				s.save(h)
				// Every event of the save comes before the sentinel's.
				h.write("notes/sentinel", "")
				got := union(h.waitFor(x, "notes/sentinel"))
				for _, p := range got {
					if p != x && p != "notes/sentinel" {
						t.Errorf("reported %s (all: %v)", p, got)
					}
				}
			})
		}
	}
}

// TestWatcher_ScratchNamedExactly: a path named exactly is reported even if
// it looks like a scratch file.
func TestWatcher_ScratchNamedExactly(t *testing.T) {
	h := watch(t, Config{Paths: []string{"build.tmp"}})
	h.write("build.tmp", "")
	h.waitFor("build.tmp")
	if !scratch(path.Base("build.tmp")) {
		t.Fatal("the test needs a scratch-looking name")
	}
}
