// Package engine drives plans: one Run type for the workspace's state.json and
// every named run, the sidecar's event loop, plan intake, the check and step
// chain, pull, and the one command surface (Retry, Trigger, Report, Close) that
// every face calls. It acts on the disk through store and on agents through
// proc; the rules it follows are core's. See ARCHITECTURE.md.
package engine
