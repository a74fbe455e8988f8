GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build test bench lint run fuzz clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/stepseq .
	$(GO) build -o $(BIN)/demoagent ./examples/demoagent

# The demo: a copy of examples/demo in a temporary workspace, run by the sidecar
# with the demo agent. The gate of the second step opens two seconds in, as a
# person approving would; the sidecar exits once the plan is DONE.
run: build
	@ws=$$(mktemp -d -t stepseq-demo-XXXXXX); \
	cp -R examples/demo/. "$$ws"; \
	echo "demo workspace: $$ws"; \
	( sleep 2; echo ">>> approving: touch approved.txt"; touch "$$ws/approved.txt" ) & \
	STEP_AGENT_CMD="$(CURDIR)/$(BIN)/demoagent" timeout 120 $(BIN)/stepseq watch --exit-when-done "$$ws" && \
	$(BIN)/stepseq status "$$ws"

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

# Whole-system benchmarks run once each (they time many steps inside); the
# micro-benchmarks of planspec run for the usual second.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -count 1 ./executor ./watcher
	$(GO) test -run '^$$' -bench . -count 1 ./planspec
	$(GO) test -run '^$$' -bench . -benchtime 3x -count 1 .

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseState -fuzztime 20s ./planspec
	$(GO) test -run '^$$' -fuzz FuzzParsePlan -fuzztime 20s ./planspec
	$(GO) test -run '^$$' -fuzz FuzzCompileCondition -fuzztime 20s ./planspec

lint:
	$(GO) vet ./...
	test -z "$$(gofmt -l .)"
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

clean:
	rm -rf $(BIN)
