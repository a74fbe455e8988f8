package exepages

import (
	"encoding/binary"
	"os"
	"reflect"
	"testing"
)

// pagemap counts the pages of spans that are mapped, from /proc/self/pagemap
// (bit 63 of a page's entry: present), into buffers made beforehand, so that
// counting maps back as few pages as it can.
type pagemap struct {
	f    *os.File
	bufs [][]byte
}

func newPagemap(t *testing.T, spans []span) *pagemap {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pm := &pagemap{f: f}
	for _, s := range spans {
		pm.bufs = append(pm.bufs, make([]byte, (s.end-s.start)/4096*8))
	}
	return pm
}

func (pm *pagemap) mapped(spans []span) (pages int, err error) {
	for i, s := range spans {
		if _, err := pm.f.ReadAt(pm.bufs[i], int64(s.start/4096*8)); err != nil {
			return 0, err
		}
	}
	for _, b := range pm.bufs {
		for off := 0; off < len(b); off += 8 {
			if binary.LittleEndian.Uint64(b[off:])>>63 == 1 {
				pages++
			}
		}
	}
	return pages, nil
}

func TestRelease_UnmapsTheExecutablesReadOnlyPages(t *testing.T) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	spans, err := cleanSpans(f, reflect.ValueOf(Release).Pointer())
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) < 2 {
		t.Fatalf("spans %v, want the code and the read-only data", spans)
	}
	pm := newPagemap(t, spans)
	before, err := pm.mapped(spans)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after, err := pm.mapped(spans)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, s := range spans {
		size += int64(s.end - s.start)
	}
	if n != size {
		t.Errorf("released %d bytes, want the spans' %d", n, size)
	}
	// Returning from Release and reading the page map map some pages back, a
	// quarter of them under -race, whose runtime is bigger.
	if after*2 > before {
		t.Errorf("%d pages mapped after the release, %d before: want under half", after, before)
	}
	t.Logf("read-only pages mapped: %d before, %d after", before, after)
}
