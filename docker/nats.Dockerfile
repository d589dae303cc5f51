# NATS server with JetStream (Debian's package, as the local backend installs).
FROM debian:bookworm
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nats-server \
 && rm -rf /var/lib/apt/lists/*
COPY docker/driftlab-entry /usr/local/bin/driftlab-entry
ENTRYPOINT ["/usr/local/bin/driftlab-entry"]
