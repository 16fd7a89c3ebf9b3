# Two commands for a new machine: `make demo` and `make test`. Both install what is missing.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
TOOLS   := tools/bin
STAMP   := $(VENV)/.installed-stamp
TOXI_VERSION := 2.12.0
# the stamp names the version: a binary built without it (it printed `version git`) is rebuilt once
TOXI    := $(TOOLS)/.toxiproxy-server-$(TOXI_VERSION)
XDIST   ?= -n 2
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
# the library core and the faults only containers have, run again as containers (issue 9), and
# live shard migration with shard groups started and retired as containers (issue 13)
DOCKER_SCENARIOS := $(addprefix scenarios/,$(addsuffix .yaml,kill-primary pause-primary replica-restart-catchup \
  loss-5-worker-links partition-primary-replicas all-copies-lost cpu-throttle-primary memory-limit-primary \
  disk-full-primary scale-out-shards scale-in-shards))

.PHONY: install system-deps docker-engine test unit integration demo bench doctor clean proto

install: system-deps $(STAMP) $(TOXI)

# etcd (Debian etcd-server, 3.4), nftables, Chromium with its driver (report rendering tests),
# and Redis with Sentinel (the redis-sentinel adapter's scenarios); apt only when a part is missing.
system-deps:
	@if ! command -v etcd >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1 || \
	    ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1 || \
	    ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-sentinel >/dev/null 2>&1; then \
	  echo "installing etcd-server, nftables, chromium, chromium-driver, redis-server and redis-sentinel from Debian"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    etcd-server nftables chromium chromium-driver redis-server redis-sentinel >/dev/null; \
	fi

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# Toxiproxy, the real server, built from the Go module proxy into an ignored folder, with its
# version stamped (the module's `toxiproxy.Version` is "git" unless the linker sets it).
$(TOXI):
	mkdir -p $(TOOLS)
	GOBIN=$(abspath $(TOOLS)) $(GO) install \
	  -ldflags "-X github.com/Shopify/toxiproxy/v2.Version=$(TOXI_VERSION)" \
	  github.com/Shopify/toxiproxy/v2/cmd/server@v$(TOXI_VERSION)
	mv $(TOOLS)/server $(TOOLS)/toxiproxy-server
	touch $@

# A Docker engine for the docker backend's tests: installed from Debian and started when none answers.
docker-engine:
	.ci/docker-engine

proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Ipsnodes/proto --python_out=psnodes/proto \
	  --grpc_python_out=psnodes/proto --pyi_out=psnodes/proto psnodes/proto/ps.proto
	sed -i 's/^import ps_pb2 as ps__pb2/from . import ps_pb2 as ps__pb2/' psnodes/proto/ps_pb2_grpc.py

test: install docker-engine
	$(BIN)/pschaos doctor
	$(BIN)/python -m pytest $(XDIST) -q -p no:cacheprovider --durations=30 tests scenarios
	# the whole scenario library again, in the SimPy twin (virtual time, same checkers)
	$(BIN)/python -m pytest $(XDIST) -q -p no:cacheprovider scenarios --pschaos-backend sim
	# the library core and the container-only faults on --backend docker (real engine, real containers),
	# one scenario at a time: two 9-container clusters on 2 cores starve heartbeats into false failovers,
	# whose snapshot catch-ups then fail catch-up-by-delta (seen once in three runs)
	$(BIN)/python -m pytest -q -p no:cacheprovider $(DOCKER_SCENARIOS) --pschaos-backend docker

unit: install
	$(BIN)/python -m pytest -q tests/unit

integration: install
	$(BIN)/python -m pytest $(XDIST) -q tests/integration

demo: install
	$(BIN)/pschaos demo

bench: install
	$(BIN)/pschaos bench ps --json
	$(BIN)/pschaos bench sim
	$(BIN)/pschaos bench scale

doctor: install
	$(BIN)/pschaos doctor

clean:
	-$(BIN)/pschaos clean
