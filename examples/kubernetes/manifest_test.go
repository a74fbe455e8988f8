// Package kubernetes_test checks that the example sidecar manifest holds together:
// the agent and stepseq share the workspace, and the probes reach the address
// stepseq serves them on. It needs no cluster: the manifest is read as YAML.
package kubernetes_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stepseq/stepseq/planspec"
)

// The parts of a Kubernetes object this test reads. Everything else is ignored.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		podSpec  `yaml:",inline"` // kind: Pod
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"` // Deployment, StatefulSet, DaemonSet, Job
	} `yaml:"spec"`
}

type podSpec struct {
	Containers []container `yaml:"containers"`
	Volumes    []struct {
		Name string `yaml:"name"`
	} `yaml:"volumes"`
}

type container struct {
	Name         string   `yaml:"name"`
	Command      []string `yaml:"command"`
	Args         []string `yaml:"args"`
	Ports        []port   `yaml:"ports"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
}

type port struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"` // a number or a port's name
	} `yaml:"httpGet"`
}

// readManifest decodes every document of a multi-document YAML stream.
func readManifest(r io.Reader, name string) ([]object, error) {
	var objs []object
	dec := yaml.NewDecoder(r)
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, len(objs)+1, err)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
}

// pod returns the pod template of the one workload in the manifest.
func pod(objs []object) (podSpec, error) {
	var pods []podSpec
	for _, o := range objs {
		switch o.Kind {
		case "Pod":
			pods = append(pods, o.Spec.podSpec)
		case "Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet":
			pods = append(pods, o.Spec.Template.Spec)
		}
	}
	if len(pods) != 1 {
		return podSpec{}, fmt.Errorf("want one workload (a Deployment or a Pod), found %d", len(pods))
	}
	return pods[0], nil
}

// argv is what the container runs: command, then args.
func (c container) argv() []string { return append(slices.Clone(c.Command), c.Args...) }

func (c container) isStepseq() bool {
	argv := c.argv()
	return len(argv) > 0 && (argv[0] == "stepseq" || strings.HasSuffix(argv[0], "/stepseq"))
}

// flag returns the value of --name (as "--name V" or "--name=V").
func flag(argv []string, name string) (string, bool) {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(argv) {
			return argv[i+1], true
		}
	}
	return "", false
}

// probePort resolves a probe's port, a number or a named container port.
func (c container) probePort(p any) (int, error) {
	switch v := p.(type) {
	case int:
		return v, nil
	case string:
		if n, err := strconv.Atoi(v); err == nil {
			return n, nil
		}
		for _, cp := range c.Ports {
			if cp.Name == v {
				return cp.ContainerPort, nil
			}
		}
		return 0, fmt.Errorf("no container port named %q", v)
	}
	return 0, fmt.Errorf("port %v: want a number or a port name", p)
}

// check lists what is wrong with a pod running stepseq beside an agent.
func check(spec podSpec) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	var sidecar, agent *container
	for i := range spec.Containers {
		c := &spec.Containers[i]
		switch {
		case c.isStepseq() && sidecar != nil:
			fail("two stepseq containers, %s and %s: one sidecar per workspace", sidecar.Name, c.Name)
		case c.isStepseq():
			sidecar = c
		case agent == nil:
			agent = c
		}
	}
	if sidecar == nil || agent == nil {
		return append(problems, "want a container running stepseq and an agent container beside it")
	}
	argv := sidecar.argv()
	if len(argv) < 2 || argv[1] != "watch" {
		return append(problems, fmt.Sprintf("stepseq container runs %q, want stepseq watch DIR", argv))
	}

	// The two share the workspace: one volume, at one path, and stepseq watches it.
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	for _, c := range []*container{sidecar, agent} {
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				fail("container %s mounts volume %q, which spec.volumes does not define", c.Name, m.Name)
			}
		}
	}
	var shared []string
	for _, a := range agent.VolumeMounts {
		for _, s := range sidecar.VolumeMounts {
			if a.Name == s.Name && a.MountPath == s.MountPath {
				shared = append(shared, a.MountPath)
			}
		}
	}
	dir := "."
	if len(argv) > 2 && !strings.HasPrefix(argv[2], "-") {
		dir = argv[2]
	}
	switch {
	case len(shared) == 0:
		fail("containers %s and %s mount no volume at the same path", agent.Name, sidecar.Name)
	case !slices.Contains(shared, dir):
		fail("stepseq watches %s, but the shared workspace is at %v", dir, shared)
	}

	// The probes reach what --listen serves.
	listen, ok := flag(argv, "--listen")
	if !ok {
		return append(problems, fmt.Sprintf("stepseq runs %q without --listen: the probes have nothing to reach", argv))
	}
	_, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return append(problems, fmt.Sprintf("--listen %q: %v", listen, err))
	}
	listenPort, err := strconv.Atoi(portText)
	if err != nil {
		return append(problems, fmt.Sprintf("--listen %q: port %q is not a number", listen, portText))
	}
	for _, p := range []struct {
		kind  string
		probe *probe
		path  string
	}{
		{"livenessProbe", sidecar.LivenessProbe, "/healthz"},
		{"readinessProbe", sidecar.ReadinessProbe, "/readyz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			fail("stepseq container: no %s.httpGet", p.kind)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			fail("%s.httpGet.path = %q, want %q", p.kind, p.probe.HTTPGet.Path, p.path)
		}
		port, err := sidecar.probePort(p.probe.HTTPGet.Port)
		if err != nil {
			fail("%s: %v", p.kind, err)
		} else if port != listenPort {
			fail("%s probes port %d, but stepseq listens on %d (--listen %s)", p.kind, port, listenPort, listen)
		}
	}

	// The agent command is one stepseq will run: not a shell, by stepseq's own rule.
	for _, e := range sidecar.Env {
		if words := strings.Fields(e.Value); e.Name == "STEP_AGENT_CMD" && len(words) > 0 {
			if err := planspec.CheckAgentArgv(words, nil); err != nil {
				fail("STEP_AGENT_CMD %q: %v", e.Value, err)
			}
		}
	}

	// Beyond loopback stepseq wants a token, and it comes from a Secret.
	host, _, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		if secret := sidecar.secretEnv("STEPSEQ_TOKEN"); secret == "" {
			fail("stepseq listens on %s, beyond loopback, without STEPSEQ_TOKEN from a Secret (valueFrom.secretKeyRef)", listen)
		}
	}
	return problems
}

// secretEnv is the Secret a container's variable name comes from, or "".
func (c container) secretEnv(name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return ""
}

// checkPull lists what is wrong with the pull shape beyond check: the agent
// sends the token stepseq wants, from the same Secret, and stepseq, whose
// workspace the agent's container can write, runs no program (--allow-agent mcp).
func checkPull(spec podSpec) []string {
	var problems []string
	var sidecar, agent *container
	for i := range spec.Containers {
		if c := &spec.Containers[i]; c.isStepseq() {
			sidecar = c
		} else if agent == nil {
			agent = c
		}
	}
	if sidecar == nil || agent == nil {
		return []string{"want a stepseq and an agent container"}
	}
	if want, got := sidecar.secretEnv("STEPSEQ_TOKEN"), agent.secretEnv("STEPSEQ_TOKEN"); got == "" || got != want {
		problems = append(problems, fmt.Sprintf("the agent's STEPSEQ_TOKEN comes from %q, stepseq's from %q: want one Secret", got, want))
	}
	if v, ok := flag(sidecar.argv(), "--allow-agent"); !ok || v != "mcp" {
		problems = append(problems, "stepseq runs without --allow-agent mcp: a plan the agent's container drops in plans/ could run a program in stepseq's container")
	}
	return problems
}

func TestSidecarManifest(t *testing.T) {
	// sidecar.yaml: stepseq launches the agent CLI in its own container;
	// pull.yaml: the agent keeps its container and pulls its steps over /mcp.
	for _, name := range []string{"sidecar.yaml", "pull.yaml"} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			objs, err := readManifest(f, name)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := pod(objs)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range check(spec) {
				t.Error(p)
			}
			if name == "pull.yaml" {
				if !pullsOverMCP(spec) {
					t.Error("pull.yaml: no agent container is pointed at stepseq's /mcp on localhost:8080")
				}
				for _, p := range checkPull(spec) {
					t.Error(p)
				}
			}
		})
	}
}

// pullsOverMCP reports whether a container other than stepseq is told where
// stepseq's MCP endpoint is.
func pullsOverMCP(spec podSpec) bool {
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if c.Name != "stepseq" && strings.Contains(e.Value, "localhost:8080/mcp") {
				return true
			}
		}
	}
	return false
}

// TestCheck_Broken: the checks find what breaks a sidecar pod.
func TestCheck_Broken(t *testing.T) {
	const manifest = `
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
---
apiVersion: v1
kind: Pod
metadata: {name: broken}
spec:
  containers:
    - name: agent
      image: agent
      volumeMounts: [{name: workspace, mountPath: /work}]
    - name: stepseq
      image: stepseq
      args: [--listen=:9090]
      command: [/usr/local/bin/stepseq, watch, /workspace]
      env: [{name: STEP_AGENT_CMD, value: sh -c agent}]
      ports: [{name: http, containerPort: 8080}]
      livenessProbe: {httpGet: {path: /health, port: http}}
      volumeMounts: [{name: workspace, mountPath: /workspace}, {name: cache, mountPath: /cache}]
  volumes: [{name: workspace, emptyDir: {}}]
`
	objs, err := readManifest(strings.NewReader(manifest), "broken.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := pod(objs)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(check(spec), "\n")
	for _, want := range []string{
		`container stepseq mounts volume "cache", which spec.volumes does not define`,
		"mount no volume at the same path",
		`livenessProbe.httpGet.path = "/health", want "/healthz"`,
		"livenessProbe probes port 8080, but stepseq listens on 9090",
		"no readinessProbe.httpGet",
		`STEP_AGENT_CMD "sh -c agent": "sh" is a shell;`,
		"stepseq listens on :9090, beyond loopback, without STEPSEQ_TOKEN from a Secret",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
}
