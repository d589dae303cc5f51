# Redis 7 (Debian's package, as the local backend installs).
FROM debian:bookworm
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d
COPY docker/driftlab-entry /usr/local/bin/driftlab-entry
ENTRYPOINT ["/usr/local/bin/driftlab-entry"]
# Without a command from the harness (testcontainers' RedisContainer without a
# password): a server on the loopback only, nothing saved.
CMD ["/usr/bin/redis-server", "--bind", "127.0.0.1", "--save", ""]
