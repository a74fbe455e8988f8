// Package watcher turns file system notifications into coalesced batches of
// changed paths, relative to one workspace directory.
//
// It owns the watch set: which directories hold an inotify watch (read
// directly on Linux, a slice of events per read; through fsnotify elsewhere)
// so that changes to the paths and trees it was given are seen,
// including paths that do not exist yet, directories created a moment before
// their files, editors that save by rename, the workspace itself removed and
// recreated, and a kernel queue that overflowed. It owns the coalescing of a
// burst of events into a few batches (the first change after a quiet spell
// is delivered at once), and an opt-in polling mode for file
// systems that deliver no events ([NetworkFS] tells when that is likely).
//
// It does not know what a plan, a step or a state file is, and it never reads
// file contents: the caller names the paths that matter and decides what a
// change means. A [Batch] says "these paths may have changed" (or, with
// Rescan, "anything may have changed"); the caller re-reads what it needs.
package watcher
