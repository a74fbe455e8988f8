package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Probe runs true in spec's sandbox and says why it cannot run there: bwrap is
// missing (ErrNoBwrap), the system refuses it its namespaces (ErrNoNamespaces,
// with the fix), or bwrap's own message. A launcher probes before it launches a
// sandboxed agent, so that a sandbox that cannot be had fails the try with its
// reason, never as the agent's exit, and never runs the agent bare. It makes the
// folders Command makes.
func Probe(ctx context.Context, spec Spec) error {
	spec.Argv = []string{"true"}
	argv, env, err := Command(spec)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = SysProcAttr()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("sandbox: probe: %w", ctx.Err())
		}
		return explain(out.String(), err)
	}
	return nil
}

// namespaceFailures are what bwrap says when the system refuses it a namespace:
// user namespaces off (Debian's unprivileged_userns_clone, a container's seccomp
// profile), none left (max_user_namespaces), or refused by AppArmor (Ubuntu 24.04
// and later, which lets it create one but not use it).
var namespaceFailures = []string{
	"Creating new namespace failed",
	"No permissions to creat", // "No permissions to creating new namespace" (sic)
	"setting up uid map",
	"loopback: Failed",
	"Failed to make / slave",
}

// explain turns a failed run of true in the sandbox into the reason and its fix.
func explain(output string, err error) error {
	msg := strings.TrimSpace(output)
	for _, f := range namespaceFailures {
		if strings.Contains(msg, f) {
			return fmt.Errorf("%w: %s; %s", ErrNoNamespaces, msg, namespaceFix())
		}
	}
	var ee *exec.ExitError
	if msg == "" && !errors.As(err, &ee) {
		return fmt.Errorf("sandbox: %w", err)
	}
	return fmt.Errorf("sandbox: bwrap failed (%w): %s", err, msg)
}

// namespaceFix names the setting that refuses user namespaces here, read from
// the kernel's, or the ones that may.
func namespaceFix() string {
	sysctl := func(name string) string {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	switch {
	case sysctl("kernel.unprivileged_userns_clone") == "0":
		return "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1"
	case sysctl("user.max_user_namespaces") == "0":
		return "allow user namespaces: sysctl -w user.max_user_namespaces=15000"
	case sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
		return "AppArmor keeps user namespaces from bwrap: give /usr/bin/bwrap a profile with `userns,` or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	}
	return "allow unprivileged user namespaces (kernel.unprivileged_userns_clone=1, user.max_user_namespaces above 0; in a container, a seccomp profile that allows them)"
}
