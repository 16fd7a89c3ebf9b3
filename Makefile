# Two commands for a new machine: `make demo` and `make test`. Both install what is missing.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
TOOLS   := tools/bin
STAMP   := $(VENV)/.installed-stamp
TOXI_VERSION := 2.12.0
TF_VERSION   := 2.21.0
UV_VERSION   := 0.13.9
UV_VENV      := tools/uv
UV           := $(UV_VENV)/bin/uv
UV_TRIED     := $(UV_VENV)/.tried-$(UV_VERSION)
# uv reads its own variables: pip's (a local wheel folder, another index) passed on where set
UV_ENV       := $(if $(PIP_FIND_LINKS),UV_FIND_LINKS="$(PIP_FIND_LINKS)") \
  $(if $(PIP_INDEX_URL),UV_INDEX_URL="$(PIP_INDEX_URL)") \
  $(if $(PIP_EXTRA_INDEX_URL),UV_EXTRA_INDEX_URL="$(PIP_EXTRA_INDEX_URL)")
TF_VENV      := tools/tf-venv
TF_STAMP     := $(TF_VENV)/.installed-tensorflow-cpu-$(TF_VERSION)
PSCHAOS_TF_PYTHON ?= $(abspath $(TF_VENV))/bin/python
export PSCHAOS_TF_PYTHON
# the stamp names the version: a binary built without it (it printed `version git`) is rebuilt once
TOXI    := $(TOOLS)/.toxiproxy-server-$(TOXI_VERSION)
XDIST   ?= -n 2 --dist loadgroup
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
# etcd 3.5, built from the Go module proxy (.ci/etcd-3.5 pins it): the etcd-facing tests run on it
# too, beside Debian's etcd 3.4
ETCD35  := $(TOOLS)/etcd-3.5
# psnodes' control plane (routing, leases, membership) and the etcd adapter (etcd as the system under test)
ETCD_TESTS := tests/integration/test_members.py $(addprefix scenarios/,$(addsuffix .yaml,kill-primary etcd-store-kill-leader))
# the library core and the faults only containers have, run again as containers (issue 9), and
# live shard migration with shard groups started and retired as containers (issue 13)
# (DOCKER_LONG left it for time and runs in `make test-docker`: a container started again is taken
# by kill-primary's heal, one stopped by scale-in-shards, nftables on the host network by
# partition-primary-replicas; only replica-restart-catchup judges a catch-up by delta in containers)
DOCKER_SCENARIOS := $(addprefix scenarios/,$(addsuffix .yaml,kill-primary pause-primary \
  partition-primary-replicas all-copies-lost cpu-throttle-primary memory-limit-primary \
  disk-full-primary scale-out-shards scale-in-shards))
DOCKER_LONG := $(addprefix scenarios/,$(addsuffix .yaml,replica-restart-catchup loss-5-worker-links))

# When the docker tier runs, these of its scenarios are not run again on processes: the docker
# tier runs them on the same psnodes with the same checks, and the process backend's paths they
# take stay proved on processes in `make test` by another test:
#   kill-primary        -> the etcd 3.5 pass runs it on processes (ETCD_TESTS)
#   pause-primary       -> pause-replica and async-pause-primary (SIGSTOP of a node)
#   all-copies-lost     -> stale-checkpoint-writer (kills with wiped disks, losses-accounted) and
#                          test_catchup_checkpoint.py::test_all_copies_lost_restores_from_checkpoint_and_reports_it
#   scale-out-shards    -> every migration-* scenario starts with the same scale-out on processes
# Locally, without the docker tier, they run on processes as before. `make test-long` runs them there.
DOCKER_ALSO := $(addprefix scenarios/,$(addsuffix .yaml,kill-primary pause-primary all-copies-lost \
  scale-out-shards))

# What `make test` leaves to `make test-long` on processes, for its 25 minutes on 2 cores
# (docs/measurements/suite-time.md). Each psnodes scenario below still runs in `make test` on the
# twin (the same psnodes code and checkers, in virtual time); each line names the scenario or
# test that takes its process path in `make test`, and what only it proves, where anything:
#   split-brain-restore         -> test_failover.py::test_primary_cut_from_etcd_stops_acking_before_a_restore
#                                  (the same cut from etcd past the lease, then a restore) and
#                                  stale-checkpoint-writer (a restore judged by losses-accounted)
#   latency-100-primary-replica -> latency-100-both-ways (100 ms on the same links, both ways)
#   latency-primary-replica     -> latency-100-both-ways and kill-primary-slow-replication (150 ms)
#   kill-during-checkpoint      -> power-loss-primary-mid-checkpoint (a kill timed to the same
#                                  checkpoint write, and its disk cut; skipped where no FUSE disk mounts)
#   async-kill-primary          -> async-kill-lagging-replica (a kill of an async primary)
#   migration-kill-source-primary -> migration-kill-source-handoff (the source primary killed during
#                                  a scale-out, later: in the hand-off); only it: a kill during the copy
#   tf-kill-worker              -> tf-kill-worker-mid-closure (the same worker kill, its finding
#                                  certain) and tf-kill-ps (lost-work-bounded and restarts-bounded on
#                                  the same job); only it: the closures rescheduled on a second worker
#   tf-kill-chief               -> tf-kill-ps (the coordinator restarts and resumes from its last
#                                  checkpoint on the same servers, started again by the harness);
#                                  only it: the chief's kill
#   ddp-kill-agent              -> tf-kill-ps (a job's driver started again by the harness, resumed from
#                                  its checkpoint, equal to an uninterrupted run) and ddp-kill-mid-checkpoint
#                                  (a torchrun group restarted); only it: the agent's own SIGKILL, its
#                                  orphaned ranks reaped, and the whole job relaunched by the harness as a
#                                  new incarnation (tf-kill-ps restarts one process of its job)
#   redis-kill-master           -> tests/integration/test_adapters.py (the documented Redis adapter: its
#                                  master killed and started again empty, the finding that it wipes its
#                                  replicas; plain replication, no Sentinel) and redis-partition-master-wait
#                                  (Sentinel's failover, every update decided); only it: the Sentinel
#                                  adapter's master killed, started again from its config file and made
#                                  a replica by the Sentinels, no-lost-updates decided after it
#   tf-latency-ps               -> tf-loss-ps (the same worker-to-ps links, through nftables) and
#                                  latency-100-both-ways (Toxiproxy's latency); only it: Toxiproxy in
#                                  front of a parameter server
#   ddp-kill-rank               -> ddp-kill-mid-checkpoint (a rank killed, torchrun restarts the group)
#   ddp-pause-rank              -> tf-pause-ps (a job's task paused, judged by no-silent-hang) and
#                                  ddp-kill-mid-checkpoint (torchrun's group restart); what only it
#                                  proves, a collective timeout starting that restart, waits 45 s
#   accelerate-restart-static-store -> accelerate-kill-rank (the same kill; the finding is a race,
#                                      may_find, docs/findings/accelerate-static-restart.md)
#   ddp-loss-rank               -> tf-loss-ps (loss through nftables on a training job's own links,
#                                  ridden out on TCP's retransmits, ended equal to an uninterrupted
#                                  run) and the unit test tests/unit/harness/backends/jobs/test_job_links.py
#                                  (a rank cut on its own ends of its sockets, on fake sockets); only
#                                  it: gloo's collectives under loss, and torchrun's ports found on
#                                  real gloo sockets
#   ddp-restart-shared-store    -> ddp-kill-mid-checkpoint (the same rank kill and group restart; the
#                                  finding is a race, may_find, docs/findings/torchrun-restart-shared-store.md)
#   one-way-cut-primary         -> cut-primary-retries (the same one-way cut of a primary from its
#                                  replicas, longer, judged by stops-acking and best-promoted); only
#                                  it: the default probe hold (2 s) bounding the outage
#   loss-5-worker-links         -> loss-20-worker-links (the same links through nftables, more loss)
#   loss-5-primary-replica      -> loss-20-primary-replica (the same links through nftables, more loss)
#   bandwidth-worker-shard      -> bandwidth-primary-replica (Toxiproxy's bandwidth cap, on the
#                                  replication links) and ssp-straggler (Toxiproxy on a worker's links to
#                                  the shards); only it: the workers' links capped
#   scale-out-workers           -> bsp-scale-out-workers and bsp-scale-in-workers (workers joining and
#                                  leaving while training); only it: async training's join and leave
#   ssp-scale-out-workers       -> bsp-scale-out-workers (joiners admitted at the shards' front in a new
#                                  membership generation); only it: SSP's bound for a joiner
#   ssp-scale-in-workers        -> bsp-scale-in-workers (workers that leave take themselves out of the
#                                  membership record, no gated pull times out); only it: SSP's bound
#   bsp-partition-worker-etcd   -> bsp-kill-worker (a worker's membership lease runs out, a primary
#                                  drops it, the others step on without it); only it: a worker that
#                                  fences itself when its keepalives fail
#   etcd-store-partition-leader -> etcd-store-pause-leader (the etcd leader lost to its followers: a new
#                                  election, no acknowledged write lost, linearizable reads) and
#                                  redis-partition-master-wait (an adapter's partition through nftables);
#                                  only it: the one-way cut of etcd's peer port and its terms' evidence
#   migration-loss-worker-links -> migration-partition-worker (worker links cut through the same
#                                  scale-out's switch: pending pushes re-routed with their idempotency
#                                  keys) and loss-20-worker-links (the same loss through nftables);
#                                  only it: the loss through the fenced hand-off
#   redis-partition-master, redis-partition-master-keep -> redis-partition-master-wait (the master
#                                  partitioned, one replica link kept, WAIT: the same no-lost-updates
#                                  finding); only they: the full isolation's finding, and the WAIT
#                                  comparison seed by seed
LONG_SCENARIOS := $(addprefix scenarios/,$(addsuffix .yaml,split-brain-restore \
  latency-100-primary-replica latency-primary-replica kill-during-checkpoint async-kill-primary \
  migration-kill-source-primary tf-kill-worker tf-kill-chief tf-latency-ps ddp-kill-rank ddp-pause-rank accelerate-restart-static-store \
  ddp-restart-shared-store one-way-cut-primary loss-5-worker-links redis-partition-master \
  redis-partition-master-keep migration-loss-worker-links ddp-loss-rank loss-5-primary-replica \
  bandwidth-worker-shard scale-out-workers ssp-scale-out-workers ssp-scale-in-workers \
  bsp-partition-worker-etcd etcd-store-partition-leader ddp-kill-agent redis-kill-master))
# psnodes' membership tests run once, on etcd 3.5 (ETCD_TESTS): on Debian's etcd 3.4 the bsp-*
# scenarios take the same kill, TTL and join paths in the main pass
ETCD35_ONLY := tests/integration/test_members.py
MAIN_SKIP = $(LONG_SCENARIOS) $(ETCD35_ONLY) $(if $(DOCKER_TIER),$(DOCKER_ALSO))

.PHONY: tf-venv install system-deps test-deps docker-engine test test-long test-docker unit integration demo bench doctor clean proto

install: system-deps test-deps $(STAMP) $(TOXI) $(TF_STAMP)

# TensorFlow for the tf-ps job (a system under test, never imported by the harness), in its own
# environment: its pins are not ours. The tests find it through PSCHAOS_TF_PYTHON.
tf-venv: $(TF_STAMP)
$(TF_STAMP): | $(UV_TRIED)
	test -x $(TF_VENV)/bin/python || $(PY) -m venv $(TF_VENV)
	{ test -x $(UV) && $(UV_ENV) $(UV) pip install --python $(TF_VENV)/bin/python -q tensorflow-cpu==$(TF_VERSION); } || \
	  $(TF_VENV)/bin/pip install -q tensorflow-cpu==$(TF_VERSION)
	touch $@

# what a run needs: etcd (Debian etcd-server, 3.4), nftables, a C compiler (the loopback
# preload for jobs that bind every interface, built on first use) and fuse3 (libfuse3 and
# fusermount3: the power-loss disk); apt only when a part is missing
system-deps:
	@if ! command -v etcd >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1 || \
	    ! command -v fusermount3 >/dev/null 2>&1; then \
	  echo "installing etcd-server, nftables, gcc and fuse3 from Debian"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server nftables gcc libc6-dev fuse3 >/dev/null; \
	fi

# what only the tests need: Chromium with its driver (report rendering tests) and Redis with
# Sentinel (the redis-sentinel adapter's scenarios)
test-deps:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1 || \
	    ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-sentinel >/dev/null 2>&1; then \
	  echo "installing chromium, chromium-driver, redis-server and redis-sentinel from Debian (for the tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    chromium chromium-driver redis-server redis-sentinel >/dev/null; \
	fi

# uv installs the environments (from its cache: seconds, where pip took 95 s for ours), in a
# tools folder of its own; pip does it where uv cannot be had or fails
# tried once (a stamp either way): a machine that cannot get uv does not try again at every make
$(UV_TRIED):
	rm -rf $(UV_VENV)
	$(PY) -m venv $(UV_VENV) && $(UV_VENV)/bin/pip install -q uv==$(UV_VERSION) || \
	  { rm -rf $(UV_VENV); echo "make: uv could not be installed; pip installs instead"; }
	mkdir -p $(UV_VENV) && touch $@

$(STAMP): pyproject.toml setup.py | $(UV_TRIED)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	{ test -x $(UV) && $(UV_ENV) $(UV) pip install --python $(BIN)/python -q --upgrade-package pip pip -e '.[dev,ray,disk]'; } || \
	  { $(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -e '.[dev,ray,disk]'; }
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

$(ETCD35): .ci/etcd-3.5/go.mod .ci/etcd-3.5/go.sum .ci/etcd-3.5/main.go
	mkdir -p $(TOOLS)
	cd .ci/etcd-3.5 && $(GO) build -trimpath -o $(abspath $@) .

# A Docker engine for the docker backend's tests: installed from Debian and started when none answers.
docker-engine:
	.ci/docker-engine

proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -Ipsnodes/proto --python_out=psnodes/proto \
	  --grpc_python_out=psnodes/proto --pyi_out=psnodes/proto psnodes/proto/ps.proto
	sed -i 's/^import ps_pb2 as ps__pb2/from . import ps_pb2 as ps__pb2/' psnodes/proto/ps_pb2_grpc.py

# The docker tier changes the machine's Docker configuration (.ci/docker-engine: daemon.json with
# no bridge, dockerd started): only in CI (CI=true, as .ci/run sets) or when asked (DOCKER=1).
DOCKER_TIER := $(filter 1 true yes True TRUE Yes YES,$(CI) $(DOCKER))
LIBRARY_SIM := out/library-sim
IMAGE_LOG   := out/image.log

test: install $(ETCD35) $(if $(DOCKER_TIER),docker-engine)
	$(BIN)/pschaos doctor
	# where an engine answers, the docker tests' self-contained image is built outside pytest's
	# per-test timeout (minutes the first time on a machine, for PyTorch; a minute or two after a
	# change to what the wheel holds), beside the twin's library pass below, whose verdicts do not
	# depend on the machine's pace (virtual time), and waited for before the main pass
	mkdir -p out && rm -f $(IMAGE_LOG) $(IMAGE_LOG).rc
	if docker version >/dev/null 2>&1; then { $(BIN)/pschaos image > $(IMAGE_LOG) 2>&1; echo $$? > $(IMAGE_LOG).rc; } & \
	  else echo none > $(IMAGE_LOG).rc; fi
	# the whole scenario library in the SimPy twin (virtual time, same checkers); the report-page
	# tests below render these runs instead of making them again
	rm -rf $(LIBRARY_SIM)
	$(BIN)/python -m pytest $(XDIST) -q -p no:cacheprovider scenarios --pschaos-backend sim --pschaos-out $(LIBRARY_SIM)
	n=0; while [ ! -s $(IMAGE_LOG).rc ] && [ $$n -lt 1800 ]; do sleep 2; n=$$((n + 2)); done; \
	  rc=$$(cat $(IMAGE_LOG).rc 2>/dev/null || echo "not done in 1800 s"); \
	  if [ "$$rc" != none ]; then cat $(IMAGE_LOG); fi; \
	  case "$$rc" in 0|none) ;; *) echo "make test: pschaos image failed ($$rc, above); the docker tests will say the same";; esac
	# the tests marked `long` run in `make test-long`, and so do the scenarios in MAIN_SKIP on processes
	PSCHAOS_LIBRARY_RUNS=$(abspath $(LIBRARY_SIM)) \
	  $(BIN)/python -m pytest $(XDIST) -q -p no:cacheprovider --durations=0 --durations-min=8 -m "not long" \
	  $(addprefix --deselect ,$(MAIN_SKIP)) tests scenarios
	# the etcd-facing tests again on etcd 3.5, built from the Go module proxy (Debian ships 3.4)
	PSCHAOS_ETCD=$(abspath $(ETCD35)) $(BIN)/pschaos doctor | grep -q "etcd Version: 3.5"
	PSCHAOS_ETCD=$(abspath $(ETCD35)) $(BIN)/python -m pytest $(XDIST) -q -p no:cacheprovider $(ETCD_TESTS)
ifneq ($(DOCKER_TIER),)
	# the library core and the container-only faults on --pschaos-backend docker (real engine, real
	# containers), one scenario at a time: two 9-container clusters on 2 cores starve heartbeats
	# into false failovers, whose snapshot catch-ups then fail catch-up-by-delta (seen once in three runs)
	$(BIN)/python -m pytest -q -p no:cacheprovider $(DOCKER_SCENARIOS) --pschaos-backend docker
else
	@echo "make test: the docker tier did not run (it configures this machine's Docker engine);"
	@echo "  run it with: make test DOCKER=1   (CI runs it: .ci/run sets CI=1)"
endif

# What `make test` leaves out for time: the tests marked `long` (each mark names the faster test in
# `make test` that proves the same property), the interrupt soak's full three rounds of each kind,
# the docker tier's scenarios on processes and LONG_SCENARIOS (the docker tier's own DOCKER_LONG
# runs in `make test-docker`)
test-long: install
	$(BIN)/python -m pytest $(XDIST) -q -p no:cacheprovider -m long tests
	PSCHAOS_INTERRUPTS=3 $(BIN)/python -m pytest -q -p no:cacheprovider tests/integration/test_interrupt_soak.py
	$(BIN)/python -m pytest $(XDIST) -q -p no:cacheprovider $(DOCKER_ALSO) $(LONG_SCENARIOS)

test-docker: install docker-engine
	$(BIN)/pschaos image
	$(BIN)/python -m pytest -q -p no:cacheprovider $(DOCKER_SCENARIOS) $(DOCKER_LONG) --pschaos-backend docker

unit: install
	$(BIN)/python -m pytest -q tests/unit

integration: install
	$(BIN)/python -m pytest $(XDIST) -q tests/integration

demo: system-deps $(STAMP) $(TOXI)
	$(BIN)/pschaos demo

bench: install
	$(BIN)/pschaos bench ps --json
	$(BIN)/pschaos bench sim
	$(BIN)/pschaos bench scale

doctor: install
	$(BIN)/pschaos doctor

clean:
	-$(BIN)/pschaos clean
