package watcher

// stepseq runs on Linux and macOS: a Windows build stops at this import with
// one message (use WSL), not at each of this package's Unix system calls.
import _ "github.com/stepseq/stepseq/watcher/unixonly"
