# syntax=docker/dockerfile:1

# nanobot: one static Go binary on a small Alpine base. Alpine rather than
# distroless because the exec tool runs commands with /bin/sh (and an
# operator can `docker compose exec nanobot vi /data/config.yaml`).
#
#   docker build -t nanobot --build-arg VERSION="$(git describe --tags --always --dirty)" .
#
# The exec tool confines every command with Landlock (docs/tools.md,
# Sandbox): no capability and no extra binary are needed, only a host
# kernel with Landlock (5.13+) and a seccomp profile that allows its three
# system calls (Docker 23+ and Podman's default profiles do; older ones make
# nanobot fall back to its heuristics, and `nanobot doctor` says so).
#
# Everything the daemon keeps lives on the /data volume: /data/config.yaml,
# /data/workspace (memory, skills), /data/sessions (the chats, outside the
# workspace the tools work in), the web token, the Telegram update journal
# and the pairing store. See docs/operations.md.

ARG GO_VERSION=1.26
ARG ALPINE_VERSION=3.22

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
# Static (no cgo), reproducible paths, no symbol tables; cross-compiled for
# the target platform so multi-arch builds need no emulation.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags="-s -w -X main.version=${VERSION}" \
        -o /out/nanobot ./cmd/nanobot

FROM alpine:${ALPINE_VERSION}
# ca-certificates for HTTPS to providers and platforms, tzdata for cron jobs
# and budget.timezone in IANA time zones (the binary embeds no zone data). Unpinned on purpose: a rebuild picks up security fixes.
# hadolint ignore=DL3018
RUN apk add --no-cache ca-certificates tzdata \
 && addgroup -S -g 10001 nanobot \
 && adduser -S -D -H -u 10001 -G nanobot -h /data -s /sbin/nologin nanobot \
 && install -d -m 0700 -o nanobot -g nanobot /data
COPY --from=build /out/nanobot /usr/local/bin/nanobot
# NANOBOT_CONFIG is --config's default for every subcommand; the gateway
# listens on all interfaces inside the container (publish the port to the
# host's loopback only, see docker-compose.yml).
ENV HOME=/data \
    NANOBOT_CONFIG=/data/config.yaml \
    NANOBOT_GATEWAY_LISTEN=0.0.0.0:18790
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 18790
# SIGTERM starts the graceful shutdown (gateway.shutdown_grace, 20s by
# default): give `docker stop` more time than that (-t 45, stop_grace_period).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["nanobot", "healthcheck"]
ENTRYPOINT ["nanobot"]
CMD ["gateway"]
