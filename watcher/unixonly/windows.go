//go:build windows

package unixonly

// The compiler's "undefined" names the message.
var _ = stepseq_runs_on_Linux_and_macOS__on_Windows_use_WSL
