# Kafka in KRaft mode: Java 17 (Debian's) and the jars scripts/bootstrap fetched from
# Maven Central through scripts/jars/pom.xml (vendor/kafka/libs), the very ones the
# local backend runs. The harness writes server.properties and formats the storage.
FROM debian:bookworm
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
COPY vendor/kafka/libs /opt/driftlab/kafka/libs
COPY docker/driftlab-entry /usr/local/bin/driftlab-entry
ENTRYPOINT ["/usr/local/bin/driftlab-entry"]
