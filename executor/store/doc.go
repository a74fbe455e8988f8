// Package store is the workspace on disk: its layout, the state files, the
// workspace lock, the journal, the try logs, report files, retention, and the
// capped, symlink-refusing reads (safefs) every other floor reads through. It
// knows nothing of processes or of the engine. See ARCHITECTURE.md.
package store
