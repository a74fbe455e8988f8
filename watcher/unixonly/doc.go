// Package unixonly stops a build for Windows with one message: stepseq runs
// on Linux and macOS (and FreeBSD); on Windows, use WSL. Each stepseq package
// that makes Unix system calls imports it, so that a Windows build fails here,
// once, before their calls fail one by one as undefined names of syscall.
// It sits under watcher, the lowest floor, which imports no other stepseq
// package: every package may import it. It holds nothing on other systems.
package unixonly
