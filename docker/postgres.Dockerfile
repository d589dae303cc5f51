# PostgreSQL 15 (Debian's package, as the local backend installs). The harness runs
# initdb and the server itself, with wal_level=logical on the command line.
FROM debian:bookworm
# No cluster of the package's own: driftlab initialises its data folder in the stack.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/driftlab.conf \
 && printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d
COPY docker/driftlab-entry /usr/local/bin/driftlab-entry
ENTRYPOINT ["/usr/local/bin/driftlab-entry"]
# Without a command from the harness: a server set up from POSTGRES_USER, _PASSWORD,
# _DB and PGPORT, as testcontainers' PostgresContainer expects (docs/pipelines.md).
COPY docker/postgres-server /usr/local/bin/postgres-server
CMD ["/usr/local/bin/postgres-server"]
