GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Files tests keep, such as the live page's screenshot (go test -artifacts).
ARTIFACTS := test-artifacts
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build cross test stress testreport e2e-deps bench lint run fuzz clean presets-check plugin-check chaos

all: build

# stepseq is built static (no cgo): it runs in any image, glibc or musl, and
# starts about a millisecond sooner, without the dynamic loader and libc.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/stepseq .
	$(GO) build -o $(BIN)/demoagent ./examples/demoagent

# macOS and FreeBSD: stepseq builds (bin/cross/stepseq-OS-ARCH) and every package,
# tests included, vets for each of CROSS. The Linux-only parts (pidfd, /proc,
# inotify, the stat fields) sit behind build tags, each with a portable way beside
# it; stepseq needs no cgo, so no C toolchain for the targets either.
CROSS := darwin/arm64 darwin/amd64 freebsd/amd64
cross:
	@set -e; for t in $(CROSS); do \
		os=$${t%/*}; arch=$${t#*/}; \
		echo "cross: $$os/$$arch: build, vet"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/cross/stepseq-$$os-$$arch .; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) vet ./...; \
	done

# The demo: examples/demo copied into $(DEMO), run by the sidecar with the demo
# agent. The workspace stays for a look afterwards (examples/demo/README.md says
# what to read) in that one place: each run replaces it, make clean removes it.
# The gate of the second step opens $(DEMO_APPROVE) seconds in, as a person
# approving would; the sidecar exits once the plan is DONE. Ctrl-C stops the
# sidecar (timeout runs it in the foreground, where the terminal's signal
# reaches it) and the approval that has not come yet (the traps).
DEMO         ?= $(BIN)/demo
DEMO_APPROVE ?= 2
run: build
	@rm -rf "$(DEMO)" && mkdir -p "$(DEMO)" && cp -R examples/demo/. "$(DEMO)" || exit 2; \
	ws="$(abspath $(DEMO))"; \
	echo "demo workspace: $$ws (make run replaces it)"; \
	( trap 'kill $$s 2>/dev/null; exit 0' TERM; sleep $(DEMO_APPROVE) & s=$$!; wait $$s && \
		echo ">>> approving: touch approved.txt" && touch "$$ws/approved.txt" ) & approver=$$!; \
	trap 'kill $$approver 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	STEP_AGENT_CMD="$(abspath $(BIN)/demoagent)" timeout --foreground 120 $(BIN)/stepseq watch --exit-when-done "$$ws" && \
	$(BIN)/stepseq status "$$ws" && \
	echo "the workspace stays in $$ws: examples/demo/README.md says what to look at"

# go test's whole output, as JSON, is kept in test-artifacts/test.json, so that
# a failure in CI can be read afterwards; testreport prints each package's
# result as it comes, then the last lines of every test that failed and the
# slowest tests, and fails when a test did (as does go test, by pipefail).
# go vet ./... has run every analyzer by then: go test's own vet pass, a subset
# of them type-checking every package again, is left out (-vet=off).
# -timeout is each package's test binary's bound, go test's 10 minutes by
# default: executor's race tests take minutes alone, and the CLI's tests build
# stepseq inside theirs, so a busy machine (load 30 on two cores) went past it.
# A passing run is far below 30 minutes; a wait that never ends still fails.
test: e2e-deps testreport
	$(GO) vet ./...
	@mkdir -p $(ARTIFACTS)
	bash -o pipefail -c '$(GO) test -race -vet=off -count=1 -timeout 30m -json -artifacts -outputdir $(CURDIR)/$(ARTIFACTS) ./... | $(BIN)/testreport -o $(ARTIFACTS)/test.json'

# Before a submission, not part of make test: every package's tests five times
# under -race beside two CPU-bound processes, which the target starts and stops
# by their process ids, so that a test that needs an idle machine fails here.
# The JSON is kept in test-artifacts/stress.json.
stress: e2e-deps testreport
	@mkdir -p $(ARTIFACTS)
	@bash -o pipefail -c 'yes >/dev/null & b1=$$!; yes >/dev/null & b2=$$!; \
	trap "kill $$b1 $$b2" EXIT; \
	echo "stress: two CPU burners, pids $$b1 $$b2"; \
	$(GO) test -race -count=5 -timeout 30m -json ./... | $(BIN)/testreport -o $(ARTIFACTS)/stress.json'

testreport:
	$(GO) build -o $(BIN)/testreport ./executor/internal/testreport

# What the end-to-end tests need beyond Go, each installed once and said so:
# Debian's chromium (the live page's browser test), Debian's bubblewrap (the
# agents' sandbox, whose tests run the real bwrap), and from the npm registry
# playwright-core (driving it) and the MCP TypeScript SDK (a third-party MCP
# client), each with npm ci from its lock file; Debian's nodejs and npm when
# there is no npm; Debian's python3 (the original scripts' model, executor/cli/testdata/original).
E2E_NPM := executor/web/e2e executor/mcp/e2e
e2e-deps:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "e2e-deps: installing chromium (Debian's package)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi
	@if ! command -v bwrap >/dev/null; then \
		echo "e2e-deps: installing bubblewrap (Debian's package; the agents' sandbox)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	fi
	@if ! command -v python3 >/dev/null; then \
		echo "e2e-deps: installing python3 (Debian's package; the original scripts' model runs on it)"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null; \
	fi
	@for d in $(E2E_NPM); do \
		if [ ! -f $$d/node_modules/.package-lock.json ]; then \
			if ! command -v npm >/dev/null; then \
				echo "e2e-deps: installing nodejs and npm (Debian's packages)"; \
				$(SUDO) apt-get update -qq && \
				$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
			fi; \
			echo "e2e-deps: installing $$d's npm packages (npm ci)"; \
			(cd $$d && npm ci --no-audit --no-fund) || exit 1; \
		fi; \
	done

# Whole-system benchmarks run once each (they time many steps inside); the
# micro-benchmarks of planspec run for the usual second.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./executor/engine ./executor/notify ./executor/web ./watcher
	$(GO) test -run '^$$' -bench . -count 1 ./executor/mcp ./executor/listener ./executor/core
	$(GO) test -run '^$$' -bench . -count 1 ./planspec
	$(GO) test -run '^$$' -bench . -count 1 ./executor/proc/sandbox
	$(GO) test -run '^$$' -bench 'Usage|OutputResult' -count 1 ./executor/proc
	$(GO) test -run '^$$' -bench . -benchtime 3x -count 1 ./executor/cli
	$(GO) test -run '^$$' -bench 'SubmitToAgentStart|HundredSteps|Failover' -benchtime 1x -count 1 ./executor/fleet
	$(GO) test -run '^$$' -bench RecordWrite -count 1 ./executor/fleet

# The chaos tests, not part of `make test`: random kill -9 of the built stepseq
# over long plans, each restarted at once, with a reader polling state.json and
# agents that see a twin of their step (a flock held while they run). TestChaos
# kills `watch` at random, twice in a row and 0-3 ms after a try's record;
# TestChaosCheck drives plans by `check` heartbeats killed mid-step;
# TestChaosIntake kills the sidecar while it takes plans in;
# TestChaosOrphanGrandchild kills the sidecar, then the agent's main process, a
# wrapper whose worker (python3's subprocess.Popen) does the work without the
# try lock, in the wrapper's group or in a session of its own. Overlaps, torn
# reads, steps run again after DONE, finished orphans run again, tries counted
# for interruptions, lock refusals, plans applied or run twice and temporary
# files left must all be 0. STEPSEQ_CHAOS_KILLS (default 400),
# STEPSEQ_CHAOS_STEPS (300), STEPSEQ_CHAOS_CHECK_KILLS (100),
# STEPSEQ_CHAOS_CHECK_STEPS (40), STEPSEQ_CHAOS_INTAKE_KILLS (200),
# STEPSEQ_CHAOS_GRANDCHILD_KILLS (100) and STEPSEQ_CHAOS_GRANDCHILD_STEPS (60)
# size them;
# STEPSEQ_CHAOS_KEEP, a folder, keeps each round that counted one of them
# (its workspace, the agents' stamps, stepseq's log) to be read afterwards.
chaos:
	$(GO) test -tags chaos -run TestChaos -count=1 -timeout 30m -v ./executor/engine

# The agent presets against the real CLIs that the npm registry serves (claude,
# codex, gemini, opencode, openclaw), installed into a temporary prefix: every flag
# a preset passes must appear in its CLI's own --help. Needs Node.js and npm; a CLI
# whose package asks for a newer Node than the system's (openclaw: 24 or later)
# gets one from npm's node package, in the same prefix. A CLI that cannot be
# installed or run here is named and skipped (its fake still tests it).
presets-check:
	$(GO) run ./executor/internal/presetcheck

# The Claude Code marketplace and plugin against the real Claude Code CLI (the
# native binary the npm registry serves, installed once, at a pinned version, into
# the user's cache folder): claude plugin validate --strict on the marketplace and
# on examples/claude-plugin, then the plugin installed with the README's two
# commands and stepseq init --claude, each asked through claude mcp list whether
# stepseq mcp connects. A validate that passes but reports something (a warning,
# such as a missing icon, or parts whose network hosts are not declared) fails.
# Needs Node.js and npm for the first run.
plugin-check: build
	$(GO) run ./executor/internal/plugincheck -stepseq $(BIN)/stepseq

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseState -fuzztime 20s ./planspec
	$(GO) test -run '^$$' -fuzz FuzzParsePlan -fuzztime 20s ./planspec
	$(GO) test -run '^$$' -fuzz FuzzCompileCondition -fuzztime 20s ./planspec
	$(GO) test -run '^$$' -fuzz FuzzIsCleanRel -fuzztime 20s ./watcher

lint:
	$(GO) vet ./...
	test -z "$$(gofmt -l .)"
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

clean:
	rm -rf $(BIN) $(ARTIFACTS)
