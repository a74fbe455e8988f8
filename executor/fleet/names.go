package fleet

import (
	"errors"
	"time"
)

// The JetStream names the fleet uses. Every worker and every submit agrees on
// them; a stream or bucket of these names made with other settings is refused
// rather than changed.
const (
	// Stream is the work queue of runs: one message a run to take.
	Stream = "STEPSEQ_RUNS"
	// Bucket holds each run's record (RunKey) and the commands waiting for
	// its worker (ControlKeys), one key each.
	Bucket = "STEPSEQ_STATE"
	// Consumer is the durable pull consumer every worker takes runs from.
	Consumer = "stepseq-workers"

	subjectPrefix = "stepseq.runs."
	subjects      = subjectPrefix + ">"
)

// DefaultLease is how long a silent worker keeps its runs: the consumer's ack
// wait. A live worker renews it every third of it.
const DefaultLease = 30 * time.Second

// maxAckPending bounds the runs out with workers at once, fleet-wide.
const maxAckPending = 10000

// RunKey is the bucket key of run's record.
func RunKey(run string) string { return "run." + run }

// ControlKeys matches the bucket keys of the commands waiting for run's
// worker, "ctl.RUN.ID" each. A run's name holds no '.' (CheckRunName), so
// the wildcard matches that run's commands and no other's.
func ControlKeys(run string) string { return "ctl." + run + ".>" }

// controlKey is the key of one command for run: id sorts in the order the
// commands were given, from one clock.
func controlKey(run, id string) string { return "ctl." + run + "." + id }

// legacyControlKey is the one key older versions kept run's command under,
// each command replacing the one before. A holder reads it once, at its
// start, so that a bucket written by them loses nothing.
func legacyControlKey(run string) string { return "ctl." + run }

func subject(run string) string { return subjectPrefix + run }

// Errors the commands match with errors.Is.
var (
	// ErrUnreachable: no NATS server answered at the URL given.
	ErrUnreachable = errors.New("fleet: the NATS server is unreachable")
	// ErrSettings: the stream, bucket or consumer exists with settings the
	// fleet cannot work with.
	ErrSettings = errors.New("fleet: made with other settings")
	// ErrRepo: the repository cannot be read as git.
	ErrRepo = errors.New("fleet: the repository cannot be read")
	// ErrNoRun: no run of that name in the fleet.
	ErrNoRun = errors.New("fleet: no such run")
	// ErrRunExists: a run of that name is in the fleet already.
	ErrRunExists = errors.New("fleet: the run exists")
	// ErrRunEnded: the run is done, blocked or closed.
	ErrRunEnded = errors.New("fleet: the run has ended")
	// ErrLeaseLost: another worker holds the run now.
	ErrLeaseLost = errors.New("fleet: the lease is lost")
)
