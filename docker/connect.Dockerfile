# Kafka Connect with the Debezium PostgreSQL connector: the Kafka image's layers (the
# same first steps, so Docker's cache shares them) plus vendor/kafka/plugins, the
# Debezium jars scripts/bootstrap fetched from Maven Central.
FROM debian:bookworm
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
COPY vendor/kafka/libs /opt/driftlab/kafka/libs
COPY vendor/kafka/plugins /opt/driftlab/kafka/plugins
COPY docker/driftlab-entry /usr/local/bin/driftlab-entry
ENTRYPOINT ["/usr/local/bin/driftlab-entry"]
