# syntax=docker/dockerfile:1
# The operator image: a static (musl) app-operator binary on distroless/static, run as non-root.
#
# NB: no container engine exists on the project's machines, so this file has never been built
# there; it is kept minimal so that it is correct by reading. Build it with
#   docker build -t app-operator:0.1.0 .
# and load it where config/manager expects image `app-operator:0.1.0` (or set another one with
# `cd config/manager && kustomize edit set image controller=<registry>/app-operator:<tag>`).

# --- build -----------------------------------------------------------------------------------
FROM docker.io/library/rust:1.95-bookworm AS build
# musl-tools: the C compiler that ring needs for a static musl build.
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl wasm32-wasip2
WORKDIR /src
COPY . .
# host/build.rs builds the default guest for wasm32-wasip2 and embeds it in the binary.
# Profile dist: the release profile with whole-program LTO (Cargo.toml).
RUN cargo build --locked --profile dist -p app-operator --bin app-operator \
      --target x86_64-unknown-linux-musl \
 && cp target/x86_64-unknown-linux-musl/dist/app-operator /app-operator
# The default guest compiled ahead of time for run's default engine, so that the operator loads
# it instead of compiling it at start (on any node of x86-64-v3 or above: docs/operations.md).
RUN /app-operator guest precompile --out-dir /guests && chmod 0644 /guests/*

# --- run -------------------------------------------------------------------------------------
# distroless/static: no shell, no package manager; CA certificates and a `nonroot` user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /app-operator /app-operator
COPY --from=build /guests /guests
ENV APP_OPERATOR_GUEST_PRECOMPILED_DIR=/guests
USER 65532:65532
# 8080: /metrics; 8081: /healthz and /readyz.
EXPOSE 8080 8081
ENTRYPOINT ["/app-operator"]
CMD ["run"]
