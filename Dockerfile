# syntax=docker/dockerfile:1
# For users who build with Docker; `make image` needs no Docker engine.
# Multi-arch: docker buildx build --platform linux/amd64,linux/arm64 \
#   --build-arg VERSION=$(cat VERSION) --build-arg REVISION=$(git rev-parse HEAD) .
# The builder runs on the build machine's platform and cross-compiles.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
ARG VERSION=dev REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
    -o /out/nodeready .

# Static binary, no shell, no package manager, non-root. e2e/cmd/image builds the same image
# without a Docker engine (make image, the release); TestAgentMatchesDockerfile holds them together.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/nodeready/nodeready" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/nodeready /nodeready
USER 65532:65532
ENTRYPOINT ["/nodeready"]
