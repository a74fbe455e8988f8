// Command peakrss runs a command and writes its peak resident size, in KiB,
// to the file named by PEAKRSS_OUT: `PEAKRSS_OUT=f peakrss CMD ARGS...`. It
// exits with the command's status and passes SIGTERM and SIGINT on to it.
//
// A benchmark cannot read the peak of a process it starts itself: Linux
// carries the high-water mark of the forking process's memory across the
// exec, so the child's ru_maxrss is at least the benchmark's own peak. Started
// from this small process, the command's figure is its own.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	if len(os.Args) < 2 || os.Getenv("PEAKRSS_OUT") == "" {
		fmt.Fprintln(os.Stderr, "usage: PEAKRSS_OUT=FILE peakrss CMD [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(2)
	}
	go func() {
		for sig := range sigs {
			_ = cmd.Process.Signal(sig)
		}
	}()
	_ = cmd.Wait()
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "peakrss: no resource usage on this system")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Getenv("PEAKRSS_OUT"), []byte(strconv.FormatInt(ru.Maxrss, 10)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(2)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
