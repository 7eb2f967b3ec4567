# syntax=docker/dockerfile:1
# The hypercloud image: /usr/local/bin/hypercloud plus one symlink per personality beside it
# (so `command: [/usr/local/bin/cloud-controller-manager]` works), entrypoint hypercloud, user
# 65532:65532 (nonroot), glibc runtime without a shell.
#
#   docker build -t ghcr.io/hypercloud/hypercloud:v0.1.0 .
#
# hack/image.sh builds the same layout without a container daemon (what CI does, and checks):
# there the runtime libraries come from the build host's Debian packages instead of the
# distroless base below. Keep the two in step: hack/image.sh verify reads the USER and
# ENTRYPOINT lines of this file.

ARG RUST_VERSION=1.95

# Debian 12 (bookworm), as the runtime base: the binary links against the glibc it runs with.
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p hypercloud \
    && install -D -m 0755 target/release/hypercloud /out/usr/local/bin/hypercloud
# The symlink names come from the binary (`hypercloud --list`), as in hack/image.sh.
RUN HYPERCLOUD_BIN=/out/usr/local/bin/hypercloud \
    hack/install-symlinks.sh --link-to hypercloud /out/usr/local/bin

# libc6, libgcc-s1 and friends, /etc/passwd with nonroot (65532), /tmp, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/hypercloud"]
