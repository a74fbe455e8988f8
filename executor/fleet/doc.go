// Package fleet runs plans on many machines: runs wait on a NATS JetStream
// work queue (the stream STEPSEQ_RUNS), workers on each machine take them while
// they have room, and the key-value bucket STEPSEQ_STATE holds every run's
// newest state, guarded by revision. A worker holds a run while it acks the
// run's message in progress and its compare-and-set writes to the bucket
// succeed; one that loses a write has lost its lease and stops the run's agent
// at once. Each run lives in a fresh clone of its repository, and every
// verified step is committed and pushed to the run's branch stepseq/RUN, so
// that another worker can resume it from there.
//
// It is a face: it drives the engine's sidecar exactly as stepseq watch does
// (engine.go holds every use of the engine) and owns the queue, the leases,
// the git side and the fleet's view of its runs. It owns no scheduling of its
// own: what waits, who takes it and when a silent worker's run goes to another
// are JetStream's. Nothing here runs without --nats, and it links the NATS
// client only, never the server.
package fleet
