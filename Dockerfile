# infer_exporter: a multi-stage build. cgo is on, so the NVML collector is
# built in; it loads libnvidia-ml.so.1 at run time, which the NVIDIA
# container toolkit mounts into GPU pods. Without it the exporter runs on and
# reports the collector unavailable.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=1 go build -trimpath \
      -ldflags "-s -w \
        -X github.com/prometheus/common/version.Version=${VERSION} \
        -X github.com/prometheus/common/version.Revision=${REVISION} \
        -X github.com/prometheus/common/version.Branch=main" \
      -o /out/infer_exporter ./cmd/infer_exporter

# A small glibc image (cgo needs glibc; the build stage's Debian 12 matches
# its version), running as an unprivileged user.
FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/infer_exporter /bin/infer_exporter
USER nonroot:nonroot
EXPOSE 9750
ENTRYPOINT ["/bin/infer_exporter"]
