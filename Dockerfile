# celld-operator: a static binary on a distroless base that runs as a non-root user.
#
#   docker build -t REGISTRY/celld-operator:TAG --build-arg VERSION=TAG \
#     --build-arg COMMIT=$(git rev-parse HEAD) --build-arg BUILD_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) .

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
# Everything the binary may import; .dockerignore keeps the local cluster's state out.
# Only cmd/celld-operator is built: the simulator and the property harness are cmd/celld-sim.
COPY . .
ARG VERSION=dev
ARG COMMIT
ARG BUILD_DATE
ARG TARGETOS=linux
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${BUILD_DATE}" -o /out/celld-operator ./cmd/celld-operator

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/celld-operator /celld-operator
# 65532 is distroless' nonroot user; numeric, so runAsNonRoot can verify it.
USER 65532:65532
ENTRYPOINT ["/celld-operator"]
CMD ["run", "--leader-elect"]
