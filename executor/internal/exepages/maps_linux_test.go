package exepages

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const smaps = `00400000-00b3a000 r-xp 00000000 fe:00 10150365                           /srv/bin/stepseq (deleted)
Size:               7400 kB
Rss:                6700 kB
Private_Clean:      6700 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
00b3a000-012ee000 r--p 0073a000 fe:00 10150365                           /srv/bin/stepseq (deleted)
Private_Dirty:      5400 kB
Anonymous:             0 kB
012ee000-01300000 r--p 00eee000 fe:00 10150365                           /srv/bin/stepseq (deleted)
Private_Clean:         0 kB
Private_Dirty:        72 kB
Anonymous:            72 kB
01300000-01358000 rw-p 00f00000 fe:00 10150365                           /srv/bin/stepseq (deleted)
Private_Dirty:       120 kB
01358000-0339a000 rw-p 00000000 00:00 0
1fe59cc00000-1fe59d000000 rw-p 00000000 00:00 0
7f75af700000-7f75af900000 r--s 00000000 fe:00 10150365                   /srv/bin/stepseq
7f75af900000-7f75af910000 r-xp 00000000 fe:00 777                        /usr/lib/other.so
Private_Dirty:         0 kB
7f75af910000-7f75af920000 r--p 00010000 fe:00 777                        /usr/lib/other.so
Anonymous:             0 kB
Swap:                  8 kB
SwapPss:               8 kB
7ffcc4500000-7ffcc4521000 rw-p 00000000 00:00 0                          [stack]
not a mapping line
`

func TestCleanSpans(t *testing.T) {
	tests := []struct {
		name string
		pc   uintptr
		want []span
		err  string
	}{
		{name: "the executable's clean code and read-only data, not its relocated read-only data, its data nor a shared mapping", pc: 0x4911e0, want: []span{
			{start: 0x400000, end: 0xb3a000, perms: "r-xp", dev: "fe:00", inode: "10150365"},
			{start: 0xb3a000, end: 0x12ee000, perms: "r--p", dev: "fe:00", inode: "10150365"},
		}},
		{name: "another file's mapping, not its read-only data whose relocated page is swapped out", pc: 0x7f75af900010, want: []span{
			{start: 0x7f75af900000, end: 0x7f75af910000, perms: "r-xp", dev: "fe:00", inode: "777"},
		}},
		{name: "an anonymous mapping names no file", pc: 0x1fe59cc00010, err: "no file mapping"},
		{name: "an address mapped nowhere", pc: 0x10, err: "no file mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cleanSpans(strings.NewReader(smaps), tt.pc)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(span{})); diff != "" {
				t.Errorf("spans (-want +got):\n%s", diff)
			}
		})
	}
}
