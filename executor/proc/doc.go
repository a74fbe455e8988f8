// Package proc runs agents as processes: presets and argv, the launcher,
// process groups, the reaper, pidfd and kqueue waits, and the try locks an
// agent holds while it runs. It writes through store and never imports the
// engine. See ARCHITECTURE.md.
package proc
