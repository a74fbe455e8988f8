package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Submission is a run to put on the queue.
type Submission struct {
	Plan   []byte // the plan file's content
	File   string // its file name, for messages and the state's source
	Repo   string // a git URL or path the workers can clone
	Branch string // "": the repository's default branch
	Params map[string]any
	Run    string // "": the plan's name and a short id
}

// Submit checks the plan and its params, and the repository, then creates the
// run's record (queued) and puts the run on the queue. A run whose name is
// taken is refused. When the run cannot be queued after its record was made,
// the record says blocked, with the reason.
func Submit(ctx context.Context, c *Conn, s Submission) (Record, error) {
	name, err := checkPlan(s.Plan, s.File, s.Params)
	if err != nil {
		return Record{}, err
	}
	repo, branch, err := ResolveRepo(ctx, s.Repo, s.Branch)
	if err != nil {
		return Record{}, err
	}
	id := newID()
	run := s.Run
	if run == "" {
		run = name + "-" + id[:6]
	}
	if err := CheckRunName(run); err != nil {
		return Record{}, fmt.Errorf("run name: %w", err)
	}
	job := Job{ID: id, Run: run, Plan: s.Plan, File: s.File, Repo: repo, Branch: branch, Params: s.Params}
	rec := Record{ID: id, Run: run, Plan: name, Repo: repo, Branch: branch, Status: StatusQueued, Updated: time.Now().UTC(), Job: &job}
	data, _ := json.Marshal(rec)
	rev, err := c.KV.Create(ctx, RunKey(run), data)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		return Record{}, fmt.Errorf("%w: %s is a run of the fleet already (stepseq runs --nats lists them): give another --run", ErrRunExists, run)
	case err != nil:
		return Record{}, jsErr("record the run", err)
	}
	if err := publish(ctx, c, job); err != nil {
		rec.Status, rec.Reason = StatusBlocked, "not queued: "+err.Error()
		data, _ := json.Marshal(rec)
		if _, uerr := c.KV.Update(ctx, RunKey(run), data, rev); uerr != nil {
			return Record{}, fmt.Errorf("queue run %s: %w; its record stays queued with no message: remove it with nats kv del %s %s", run, err, Bucket, RunKey(run))
		}
		return Record{}, fmt.Errorf("queue run %s: %w (its record says blocked: stepseq retry --nats --run %s queues it again)", run, err, run)
	}
	return rec, nil
}

// publish puts job on the queue, deduplicated by the submission's id and
// try, so that a publish repeated after a lost answer queues it once.
func publish(ctx context.Context, c *Conn, job Job) error {
	data, err := json.Marshal(job)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(subject(job.Run))
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, job.ID+"/"+job.Retry+"/"+newID()[:8])
	if _, err := c.JS.PublishMsg(ctx, msg); err != nil {
		return jsErr("publish to "+Stream, err)
	}
	return nil
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
