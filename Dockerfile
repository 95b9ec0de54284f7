# syntax=docker/dockerfile:1
# The controller image: static binaries on distroless, running as non-root.
# It also carries the sandbox router (/sandbox-router), which config/router
# runs from this image with command: [/sandbox-router].
# Build: docker build -t sandbox-controller:dev .   (make docker-build)
# The runtime image (the in-sandbox server, stage sandbox-runtime):
#   docker build --target sandbox-runtime -t sandbox-runtime:dev .   (make docker-build-runtime)

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
# Exactly the packages the binaries import (go list -deps ./cmd/sandbox-controller
# ./cmd/sandbox-runtime ./cmd/sandbox-router), with the CRDs and policy
# bundles they embed. tests/image builds from these lines without Docker
# (make verify): a missing one fails there first.
COPY api/ api/
COPY apply/ apply/
COPY config/crd/ config/crd/
COPY dataplane/ dataplane/
COPY policy/ policy/
COPY render/ render/
COPY webhooks/ webhooks/
COPY cmd/sandbox-controller/ cmd/sandbox-controller/
COPY cmd/sandbox-runtime/ cmd/sandbox-runtime/
COPY cmd/sandbox-router/ cmd/sandbox-router/
ARG VERSION=dev
ARG COMMIT=unknown
# fieldsv1string: managedFields field sets interned (see GO_TAGS in the Makefile).
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -tags fieldsv1string \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/sandbox-controller ./cmd/sandbox-controller
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/sandbox-runtime ./cmd/sandbox-runtime
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/sandbox-router ./cmd/sandbox-router

# The runtime on its own. A sandbox image needs the programs its commands
# run, so the usual way in is to copy the static binary into that image:
#   COPY --from=<registry>/sandbox-runtime:<tag> /sandbox-runtime /usr/local/bin/sandbox-runtime
# Run alone (no programs to run but itself), it serves files from the
# non-root user's home.
FROM gcr.io/distroless/static-debian12:nonroot AS sandbox-runtime
COPY --from=build /out/sandbox-runtime /sandbox-runtime
USER 65532:65532
ENV SANDBOX_BASE_DIR=/home/nonroot
EXPOSE 8888 8080 9090 49983
ENTRYPOINT ["/sandbox-runtime"]

# The controller image (the default target: the last stage).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sandbox-controller /sandbox-controller
COPY --from=build /out/sandbox-router /sandbox-router
USER 65532:65532
ENTRYPOINT ["/sandbox-controller"]
