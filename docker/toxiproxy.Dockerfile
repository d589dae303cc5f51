# driftlab-toxiproxy: Toxiproxy's server with its API on a unix socket, built from
# tools/driftlab-toxiproxy as scripts/bootstrap builds it for the local backend (the
# Toxiproxy version is its go.mod's). Bookworm's Go is 1.19; the module needs 1.23,
# which bookworm-backports has.
FROM debian:bookworm AS build
# docker/ca holds the building machine's own certificate authorities (scripts/
# docker-images copies them): behind a TLS-inspecting proxy the module download needs
# them. Only this build stage sees them; the image does not keep them.
COPY docker/ca/ /usr/local/share/ca-certificates/
RUN echo 'deb http://deb.debian.org/debian bookworm-backports main' > /etc/apt/sources.list.d/backports.list \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-1.23-go ca-certificates
COPY tools/driftlab-toxiproxy/ /src/
RUN cd /src && GOTOOLCHAIN=local /usr/lib/go-1.23/bin/go build -trimpath -o /out/driftlab-toxiproxy .

FROM debian:bookworm
COPY --from=build /out/driftlab-toxiproxy /usr/local/bin/driftlab-toxiproxy
COPY docker/driftlab-entry /usr/local/bin/driftlab-entry
ENTRYPOINT ["/usr/local/bin/driftlab-entry"]
