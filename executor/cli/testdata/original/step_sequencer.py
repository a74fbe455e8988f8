#!/usr/bin/env python3
"""A model of the Agent Step Sequencer's check and runner scripts, for the tests.

Written from the contract, not from the scripts: it reads state.json
with json.load and writes it with json.dump(indent=2) as they do, keeping every
key it does not know, and follows their rules: the cursor moves past a DONE step,
a FAILED step is retried up to STEP_MAX_RETRIES tries (then one blocker line),
a PENDING or IN_PROGRESS step is run; the runner marks the try IN_PROGRESS,
sends the instruction (or the troubleshoot prompt on a retry) as the last
argument of STEP_AGENT_CMD, and marks the step DONE when the agent exits 0 with
its requiredOutputs present, else FAILED. One call runs the chain, as a check
that invokes the runner, and the check after each run, does. stepDelayMinutes
is not modelled: the tests' states have none.

Usage: step_sequencer.py [STATE]
"""
import json
import os
import subprocess
import sys
from datetime import datetime, timezone


def now():
    return datetime.now(timezone.utc).isoformat()


def load(path):
    with open(path) as f:
        return json.load(f)


def save(path, state):
    with open(path, "w") as f:
        json.dump(state, f, indent=2)


def present(root, rel):
    full = os.path.realpath(os.path.join(root, rel))
    return full.startswith(os.path.realpath(root) + os.sep) and os.path.exists(full)


def run_step(path):
    state = load(path)
    sid = state["stepQueue"][state["currentStep"]]
    spec = state["plan"]["steps"][sid]
    run = state.setdefault("stepRuns", {}).setdefault(sid, {"status": "PENDING", "tries": 0})
    tries = run.get("tries", 0)
    prompt = spec["instruction"]
    if tries > 0 and run.get("error"):
        prompt = "Step %s failed (tries: %d). Previous run ended with: %s. Please troubleshoot and retry: %s" % (
            sid, tries, run["error"], spec["instruction"])
    run.update(status="IN_PROGRESS", tries=tries + 1, lastRunIso=now())
    save(path, state)
    argv = os.environ["STEP_AGENT_CMD"].split() + [prompt]
    root = os.path.dirname(os.path.abspath(path))
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=3600)
    outputs = spec.get("requiredOutputs", spec.get("required_outputs", []))
    missing = [p for p in outputs if not present(root, p)]
    state = load(path)
    run = state["stepRuns"][sid]
    if done.returncode == 0 and not missing:
        run["status"] = "DONE"
    else:
        run["status"] = "FAILED"
        run["error"] = "Missing required outputs: " + ", ".join(missing) if done.returncode == 0 else done.stderr[:500]
    if done.stdout.strip():
        run["stdout"] = done.stdout[:500]
    save(path, state)


def check(path):
    if not os.path.exists(path):
        return 0
    limit = int(os.environ.get("STEP_MAX_RETRIES", "3"))
    while True:
        state = load(path)
        state["lastHeartbeatIso"] = now()
        if state.get("status") == "DONE":
            save(path, state)
            return 0
        queue, cur = state.get("stepQueue", []), state.get("currentStep", 0)
        if cur >= len(queue):
            state["status"] = "DONE"
            save(path, state)
            return 0
        sid = queue[cur]
        run = state.setdefault("stepRuns", {}).setdefault(sid, {"status": "PENDING", "tries": 0})
        if run.get("status") == "DONE":
            state["currentStep"] = cur + 1
            save(path, state)
            continue
        if run.get("status") == "FAILED":
            if run.get("tries", 0) >= limit:
                state.setdefault("blockers", []).append("%s: max retries (%d) exceeded" % (sid, run["tries"]))
                save(path, state)
                return 0
            run["status"] = "PENDING"
        save(path, state)
        run_step(path)


if __name__ == "__main__":
    sys.exit(check(sys.argv[1] if len(sys.argv) > 1 else "state.json"))
