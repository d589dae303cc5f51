# Toxiproxy's server, built with Go from its module (the version scripts/bootstrap
# builds for the local backend). Bookworm's Go is 1.19; toxiproxy needs 1.23, which
# bookworm-backports has.
FROM debian:bookworm AS build
ARG TOXIPROXY_VERSION=v2.12.0
# docker/ca holds the building machine's own certificate authorities (scripts/
# docker-images copies them): behind a TLS-inspecting proxy the module download needs
# them. Only this build stage sees them; the image does not keep them.
COPY docker/ca/ /usr/local/share/ca-certificates/
RUN echo 'deb http://deb.debian.org/debian bookworm-backports main' > /etc/apt/sources.list.d/backports.list \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-1.23-go ca-certificates
RUN GOTOOLCHAIN=local GOBIN=/out /usr/lib/go-1.23/bin/go install \
      "github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}" \
 && mv /out/server /out/toxiproxy-server

FROM debian:bookworm
COPY --from=build /out/toxiproxy-server /usr/local/bin/toxiproxy-server
COPY docker/driftlab-entry /usr/local/bin/driftlab-entry
ENTRYPOINT ["/usr/local/bin/driftlab-entry"]
