package proc

import "bytes"

// Bounds of the lines a capture keeps: a line longer than maxKeptLine is not
// one a preset reads its usage from, and past maxKeptLines the oldest go (a
// preset that sums them says its figure is partial).
const (
	maxKeptLine  = 16 << 10
	maxKeptLines = 4096
)

// lineKeeper keeps the lines written to it that start with prefix; nothing
// when prefix is empty. It is fed the stream in pieces, lines split anyhow.
type lineKeeper struct {
	prefix  []byte
	cur     []byte // the line being written, while it may be kept
	skip    bool   // the line being written is not kept
	kept    []string
	dropped int // lines lost to maxKeptLines
}

func (k *lineKeeper) write(b []byte) {
	if len(k.prefix) == 0 {
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		piece := b
		if i >= 0 {
			piece = b[:i]
		}
		if !k.skip {
			k.cur = append(k.cur, piece...)
			n := min(len(k.cur), len(k.prefix))
			if !bytes.Equal(k.cur[:n], k.prefix[:n]) || len(k.cur) > maxKeptLine {
				k.skip, k.cur = true, k.cur[:0]
			}
		}
		if i < 0 {
			return
		}
		k.end()
		b = b[i+1:]
	}
}

// end ends the line being written.
func (k *lineKeeper) end() {
	if !k.skip && len(k.cur) >= len(k.prefix) {
		if len(k.kept) == maxKeptLines {
			k.kept = k.kept[1:]
			k.dropped++
		}
		k.kept = append(k.kept, string(k.cur))
	}
	k.cur, k.skip = k.cur[:0], false
}

// all is the kept lines, the one still being written last; a first "" says
// that lines were dropped.
func (k *lineKeeper) all() []string {
	out := make([]string, 0, len(k.kept)+2)
	if k.dropped > 0 {
		out = append(out, "")
	}
	out = append(out, k.kept...)
	if !k.skip && len(k.cur) >= len(k.prefix) && len(k.prefix) > 0 {
		out = append(out, string(k.cur))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
