package fleet

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// streamLeader is the server leading the stream name, once one does.
func streamLeader(t *testing.T, servers []*server.Server, name string) *server.Server {
	t.Helper()
	var leader *server.Server
	waitFor(t, 30*time.Second, "a leader of "+name, func() bool {
		for _, s := range servers {
			if s.Running() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, name) {
				leader = s
				return true
			}
		}
		return false
	})
	return leader
}

// TestCluster_StreamLeaderKilled: on a cluster of three, the death of the
// server leading the queue and the bucket costs the run nothing: its worker
// keeps its lease through the election and finishes the run.
func TestCluster_StreamLeaderKilled(t *testing.T) {
	twins := agentEnv(t)
	servers := startCluster(t, 3)
	url := clusterURL(servers)
	bare := bareRepo(t)
	c := dial(t, url, 3)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	inProcessWorker(t, url, "w1", DefaultLease, 1)
	submit(t, c, Submission{Repo: bare, Run: "leader", Plan: planOf("leader",
		"write:a.txt", "pidfile:"+filepath.Join(dir, "s2.pid")+" waitfor:"+release+" write:b.txt", "write:c.txt")})
	readPID(t, filepath.Join(dir, "s2.pid"))
	replicasCurrent(t, c, Stream)
	replicasCurrent(t, c, "KV_"+Bucket)
	leader := streamLeader(t, servers, Stream)
	kvLeader := streamLeader(t, servers, "KV_"+Bucket)
	t.Logf("killing %s, the leader of %s (%s leads the bucket)", leader.Name(), Stream, kvLeader.Name())
	leader.Shutdown()
	leader.WaitForShutdown()
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The test's own connection moves to a live server and waits out the
	// election, as the worker's does.
	var rec Record
	waitFor(t, 2*time.Minute, "the run ended", func() bool {
		r, err := Get(context.Background(), c, "leader")
		rec = r
		return err == nil && ended(r.Status)
	})
	if rec.Status != StatusDone || rec.Attempt != 1 {
		t.Fatalf("record %s, attempt %d (%s): want done at the first attempt", rec.Status, rec.Attempt, rec.Reason)
	}
	if _, err := os.Stat(filepath.Join(twins, "overlaps")); err == nil {
		t.Error("two agents ran one step")
	}
}

// replicasCurrent waits until every replica of the stream name has caught up
// with its leader: a server's death then loses nothing.
func replicasCurrent(t *testing.T, c *Conn, name string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the replicas of "+name+" current", func() bool {
		s, err := c.JS.Stream(context.Background(), name)
		if err != nil {
			return false
		}
		info := s.CachedInfo()
		if info.Cluster == nil || len(info.Cluster.Replicas) < 2 {
			return false
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current {
				return false
			}
		}
		return true
	})
}

// TestCluster_WorkerPartitioned: a worker cut off from the cluster (the one
// server it reaches is gone) cannot renew its lease; it stops its agent
// before the lease runs out, and the worker that takes the run over starts
// the step's agent only once the first is gone.
func TestCluster_WorkerPartitioned(t *testing.T) {
	twins := agentEnv(t)
	servers := startCluster(t, 3)
	bare := bareRepo(t)
	c := dial(t, clusterURL(servers), 3)
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	lease := 3 * time.Second
	// A reaches one server only: the servers it would learn of are ignored.
	island := servers[2]
	nc, err := nats.Connect(island.ClientURL(), nats.IgnoreDiscoveredServers(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := Open(context.Background(), nc, Options{Name: "A", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	workerOn(t, ca, "A", lease, 1)
	submit(t, c, Submission{Repo: bare, Run: "cut", Plan: planOf("cut",
		"write:a.txt", "stamp:"+filepath.Join(dir, "s2.stamps")+" pidfile:"+filepath.Join(dir, "s2.pid")+" waitfor:"+release+" write:b.txt")})
	first := readPID(t, filepath.Join(dir, "s2.pid"))
	if err := os.Remove(filepath.Join(dir, "s2.pid")); err != nil {
		t.Fatal(err)
	}
	rest := []*server.Server{servers[0], servers[1]}
	inProcessWorker(t, clusterURL(rest), "B", lease, 1)
	replicasCurrent(t, c, Stream)
	replicasCurrent(t, c, "KV_"+Bucket)
	cut := time.Now()
	island.Shutdown()
	island.WaitForShutdown()
	waitFor(t, lease, "A's agent stopped within the lease", func() bool { return gone(first) })
	stopped := time.Since(cut)
	second := readPID(t, filepath.Join(dir, "s2.pid"))
	if second == first {
		t.Fatalf("the same agent pid %d twice", first)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var rec Record
	waitFor(t, 2*time.Minute, "the run ended", func() bool {
		r, err := Get(context.Background(), c, "cut")
		rec = r
		return err == nil && ended(r.Status)
	})
	if rec.Status != StatusDone || rec.Worker != "B" {
		t.Fatalf("record %s by %s (%s): want done by B", rec.Status, rec.Worker, rec.Reason)
	}
	if _, err := os.Stat(filepath.Join(twins, "overlaps")); err == nil {
		data, _ := os.ReadFile(filepath.Join(twins, "overlaps"))
		t.Errorf("two agents ran one step: %s", data)
	}
	t.Logf("A's agent stopped %s after the cut; the lease is %s", stopped.Round(time.Millisecond), lease)
}
