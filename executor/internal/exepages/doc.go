// Package exepages hands back the pages of the running executable's code and
// read-only data that start-up mapped, once start-up is over. It owns nothing
// else: when start-up ends is the caller's to say.
//
// Start-up runs the initialisers of every package linked in, and Linux maps a
// file's pages in 64 KB blocks around each fault, so by the time a sidecar is
// idle nearly all of its code and read-only data (12 MB of stepseq's 15) are
// mapped, though its idle loop uses a few of those pages. They are clean pages
// of the executable file: unmapping them loses nothing, they stay in the page
// cache, and a page used again is mapped again by a minor fault. The writable
// data and the heap are never touched, nor is a read-only mapping holding a
// page copied on write: the relocations a position-independent (PIE) or
// dynamically linked build's loader wrote before making them read-only, which
// the file does not hold.
package exepages
