// Package executor owns the reconcile core of stepseq and everything that acts on
// it: the state file on disk, the workspace lock, the agent processes, the journal,
// and the drivers that run the core (the heartbeat's check and step, and the
// sidecar). It is the only package that launches processes. The file formats belong
// to planspec; file events come from watcher.
package executor
