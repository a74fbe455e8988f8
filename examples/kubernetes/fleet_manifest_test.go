package kubernetes_test

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stepseq/stepseq/planspec"
)

// checkFleet lists what is wrong with a fleet: workers (a Deployment running
// stepseq worker) beside the NATS servers they reach (a StatefulSet with
// JetStream on, behind a Service).
func checkFleet(objs []object) []string {
	services := map[string][]int{}
	var nats, workers []object
	for _, o := range objs {
		switch o.Kind {
		case "Service":
			for _, p := range o.Spec.Ports {
				services[o.Metadata.Name] = append(services[o.Metadata.Name], p.Port)
			}
		case "StatefulSet":
			nats = append(nats, o)
		case "Deployment":
			workers = append(workers, o)
		}
	}
	if len(nats) != 1 || len(workers) != 1 {
		return []string{fmt.Sprintf("want one NATS StatefulSet and one worker Deployment, found %d and %d", len(nats), len(workers))}
	}
	servers := 1
	if r := nats[0].Spec.Replicas; r != nil {
		servers = *r
	}
	return append(checkNATS(nats[0], services), checkWorker(workers[0].Spec.Template.Spec, services, servers)...)
}

// checkWorker lists what is wrong with the workers' pod: stepseq worker
// reaches the servers through their Service, works in a volume, makes the
// stream with as many replicas as the cluster has servers, and runs no shell.
func checkWorker(spec podSpec, services map[string][]int, servers int) []string {
	var worker *container
	for i := range spec.Containers {
		if argv := spec.Containers[i].argv(); spec.Containers[i].isStepseq() && len(argv) > 1 && argv[1] == "worker" {
			worker = &spec.Containers[i]
		}
	}
	if worker == nil {
		return []string{"the Deployment runs no stepseq worker"}
	}
	argv := worker.argv()
	var problems []string
	if p := checkNATSURL(argv, services); p != "" {
		problems = append(problems, p)
	}
	problems = append(problems, checkWorkdir(spec, *worker)...)
	if lease, ok := flag(argv, "--lease"); ok {
		if d, err := time.ParseDuration(lease); err != nil || d < time.Second {
			problems = append(problems, fmt.Sprintf("--lease %q: want a duration of 1s or more", lease))
		}
	}
	// The queue and the records survive a server's death only when each is
	// kept on more than one of them.
	replicas := 1
	if r, ok := flag(argv, "--replicas"); ok {
		replicas, _ = strconv.Atoi(r)
	}
	if servers >= 3 && replicas < 3 {
		problems = append(problems, fmt.Sprintf("a NATS cluster of %d servers, but the worker makes the stream with --replicas %d: a server's death would lose runs", servers, replicas))
	}
	for _, e := range worker.Env {
		if words := strings.Fields(e.Value); e.Name == "STEP_AGENT_CMD" && len(words) > 0 {
			if err := planspec.CheckAgentArgv(words, nil); err != nil {
				problems = append(problems, fmt.Sprintf("STEP_AGENT_CMD %q: %v", e.Value, err))
			}
		}
	}
	return problems
}

// checkNATSURL says what is wrong with the worker's --nats: it names a
// Service of the manifest and one of its ports.
func checkNATSURL(argv []string, services map[string][]int) string {
	natsURL, ok := flag(argv, "--nats")
	if !ok {
		return "stepseq worker without --nats"
	}
	u, err := url.Parse(strings.Split(natsURL, ",")[0])
	if err != nil || u.Scheme != "nats" {
		return fmt.Sprintf("--nats %q: want nats://SERVICE:PORT", natsURL)
	}
	host, port := strings.Split(u.Hostname(), ".")[0], u.Port()
	n, _ := strconv.Atoi(port)
	if !slices.Contains(services[host], n) {
		return fmt.Sprintf("--nats %s: no Service %s with port %s in the manifest", natsURL, host, port)
	}
	return ""
}

// checkWorkdir lists what is wrong with the worker's volumes: --workdir is
// one of them, and each it mounts is defined.
func checkWorkdir(spec podSpec, worker container) []string {
	var problems []string
	workdir, ok := flag(worker.argv(), "--workdir")
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
	}
	mounted := false
	for _, m := range worker.VolumeMounts {
		mounted = mounted || m.MountPath == workdir
		if !volumes[m.Name] {
			problems = append(problems, fmt.Sprintf("container %s mounts volume %q, which spec.volumes does not define", worker.Name, m.Name))
		}
	}
	if !ok || !mounted {
		problems = append(problems, fmt.Sprintf("stepseq worker --workdir %q: want the mount path of one of its volumes", workdir))
	}
	return problems
}

// checkNATS lists what is wrong with the NATS servers: JetStream on, its
// store on a claim of each server's own, the client port served.
func checkNATS(o object, services map[string][]int) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(o.Spec.Template.Spec.Containers) == 0 {
		return []string{"the NATS StatefulSet has no container"}
	}
	c := o.Spec.Template.Spec.Containers[0]
	argv := c.argv()
	if !slices.Contains(argv, "--jetstream") && !slices.Contains(argv, "-js") {
		fail("nats-server %q without --jetstream: no queue, no bucket", argv)
	}
	store, ok := flag(argv, "--store_dir")
	claimed := false
	for _, m := range c.VolumeMounts {
		for _, t := range o.Spec.VolumeClaimTemplates {
			claimed = claimed || m.MountPath == store && m.Name == t.Metadata.Name
		}
	}
	if !ok || !claimed {
		fail("nats-server --store_dir %q: want the mount path of a volumeClaimTemplate, so a restart keeps the queue", store)
	}
	if _, ok := services[o.Spec.ServiceName]; !ok {
		fail("StatefulSet serviceName %q: no such Service in the manifest", o.Spec.ServiceName)
	}
	if !slices.ContainsFunc(c.Ports, func(p port) bool { return p.ContainerPort == 4222 }) {
		fail("nats container serves no client port 4222")
	}
	return problems
}

func TestFleetManifest(t *testing.T) {
	f, err := os.Open("fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := readManifest(f, "fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkFleet(objs) {
		t.Error(p)
	}
}

// TestCheckFleet_Broken: the checks find what breaks a fleet.
func TestCheckFleet_Broken(t *testing.T) {
	const manifest = `
apiVersion: v1
kind: Service
metadata: {name: nats}
spec: {ports: [{name: client, port: 4222}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: nats}
spec:
  serviceName: queue
  replicas: 3
  template:
    spec:
      containers:
        - name: nats
          image: nats
          args: [--store_dir=/data]
          volumeMounts: [{name: data, mountPath: /data}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: workers}
spec:
  template:
    spec:
      containers:
        - name: stepseq
          image: stepseq
          command: [stepseq, worker, --nats, "nats://queue:4222", --workdir, /runs, --lease, 10ms]
          env: [{name: STEP_AGENT_CMD, value: bash -c agent}]
          volumeMounts: [{name: work, mountPath: /work}]
`
	objs, err := readManifest(strings.NewReader(manifest), "broken.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(checkFleet(objs), "\n")
	for _, want := range []string{
		"without --jetstream",
		`--store_dir "/data": want the mount path of a volumeClaimTemplate`,
		`serviceName "queue": no such Service`,
		"serves no client port 4222",
		"--nats nats://queue:4222: no Service queue with port 4222",
		`--workdir "/runs": want the mount path`,
		`mounts volume "work", which spec.volumes does not define`,
		`--lease "10ms"`,
		"--replicas 1: a server's death would lose runs",
		`STEP_AGENT_CMD "bash -c agent"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
}
