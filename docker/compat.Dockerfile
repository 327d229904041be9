# The image of docker/compose.compat.yml's `compat` service: this tree with every client
# the compat suites run (compat-tests/*/prepare, run here at build time) and
# docker/compat-run.sh as its entrypoint. Build from the repository root:
#
#   docker build -f docker/compat.Dockerfile -t es-compat .
#
# What .ci/run's machine has and the prepare steps do not install: Java 17 with Maven,
# and a Go recent enough for franz-go (Debian 12's golang is 1.19; this copies the
# official image's).
FROM golang:1-bookworm AS go

FROM rust:1-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      openjdk-17-jdk-headless maven \
      python3 python3-venv python3-pip kcat rapidjson-dev \
      cmake pkg-config libssl-dev zlib1g-dev libzstd-dev liblz4-dev libsasl2-dev libcurl4-openssl-dev \
      curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=go /usr/local/go /usr/local/go
ENV PATH=/usr/local/go/bin:$PATH
WORKDIR /src
COPY . .
# Each suite's pinned client, fetched and built now so that a run only runs
# (compat-tests/run calls the prepare steps again; they find everything done).
RUN set -e; for p in compat-tests/*/suite.py; do \
      d=${p%/suite.py}; if [ -x "$d/prepare" ]; then "$d/prepare"; fi; \
    done
ENTRYPOINT ["docker/compat-run.sh"]
CMD []
