# app-operator developer entry points. Set-up is done by the scripts these targets call.
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help setup run test chaos bench bench-scale bench-apicost bench-oci dist guests cluster-build cluster-up cluster-down crd fmt lint \
	install uninstall deploy undeploy docker-build docker-push image image-push image-test \
	image-tools

help: ## List targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

setup: ## Install what the project needs (rustup target, Debian packages, Go-built control plane).
	hack/setup.sh

run: ## Start the local control plane, install the CRD, run the operator, apply the sample.
	hack/run.sh

test: ## Run the whole test suite (starts the local control plane if none is running).
	hack/test.sh

chaos: ## Long fault scenarios (API server restarts, compaction, partition, 10,000 AppServices).
	hack/chaos.sh

bench: ## Guest call cost benchmark (prints figures).
	hack/bench.sh

guests: ## Build the Python and JavaScript example guests into target/guests (cached).
	hack/guests/build.sh

bench-scale: ## Scale benchmark on the local control plane, side by side with the Go seed operator.
	hack/bench-scale.sh

bench-apicost: ## What each kind of write costs the API server's CPU (local control plane).
	hack/bench-apicost.sh

dist: ## Build the shipped operator binary: LTO, optimized with a profile of its own run (hack/pgo.sh).
	hack/pgo.sh

bench-oci: ## Time from `guest push --to` to active, cold and warm (local control plane + registry).
	cargo test --release -p app-operator-e2e --test oci_swap -- --ignored --nocapture bench_push_to_active

cluster-build: ## Build etcd, kube-*, kubectl and kwok from Go modules (cached under ~/.cache).
	hack/controlplane/build.sh

cluster-up: ## Start the local control plane (idempotent).
	hack/controlplane/up.sh

cluster-down: ## Stop the local control plane started by cluster-up.
	hack/controlplane/down.sh

# Image that `docker-build` tags and `deploy` deploys (config/manager's own is app-operator:0.1.0).
IMG ?= app-operator:0.1.0
# kubectl with $KUBECONFIG when set, else the local control plane's (see the script).
KUBECTL ?= hack/kubectl.sh

install: ## Install the CRD into the cluster ($KUBECONFIG, else the local control plane).
	$(KUBECTL) apply --server-side -k config/crd

uninstall: ## Remove the CRD (and with it every AppService).
	$(KUBECTL) delete --ignore-not-found -k config/crd

deploy: ## Deploy the operator (image IMG), CRD and RBAC into namespace app-operator-system.
	IMG='$(IMG)' KUBECTL='$(KUBECTL)' hack/deploy.sh apply

undeploy: ## Remove everything `deploy` created, the CRD and namespace included.
	IMG='$(IMG)' KUBECTL='$(KUBECTL)' hack/deploy.sh delete

docker-build: ## Build the operator image $(IMG) (needs a container engine; none exists here).
	docker build -t $(IMG) .

docker-push: ## Push the image IMG built by docker-build (needs a container engine).
	docker push $(IMG)

image: ## Build the operator image without a container engine (an OCI layout; hack/image.sh).
	IMG='$(IMG)' hack/image.sh build

image-push: ## Push the image built by `make image` to IMG, without a container engine.
	IMG='$(IMG)' hack/image.sh push

image-test: ## Image round trip through a local registry: build, push, pull, check, run.
	hack/image-test.sh

image-tools: ## Build crane and the OCI registry from Go modules (cached under ~/.cache).
	hack/controlplane/build-imagetools.sh

crd: ## Regenerate config/crd (and the Helm chart's copy) from the Rust types.
	cargo run --release -q -p app-operator -- crd > config/crd/apps.kudevops.io_appservices.yaml
	cp config/crd/apps.kudevops.io_appservices.yaml charts/app-operator/crds/

fmt: ## Format.
	cargo fmt --all

lint: ## Format check and clippy.
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
