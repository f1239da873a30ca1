# greenshard-controller (and the greenshard CLI) on Debian bookworm, slim.
# No LibTorch in the image: the controller never links it.
#
#   docker build -f dockerfiles/controller.Dockerfile -t greenshard-controller:0.1.0 .
#
# Base images are pinned to exact version tags (point release of Debian 12).

FROM debian:12.11-slim AS build
ENV DEBIAN_FRONTEND=noninteractive
# The top-level CMakeLists.txt still calls find_package(Torch REQUIRED) and
# looks for Gloo before it reads GREENSHARD_SKIP_DIRS, so configuring needs
# libtorch-dev and libgloo-dev even though no controller target links them.
# They stay in this build stage only.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      nlohmann-json3-dev libcpp-httplib-dev libssl-dev libsqlite3-dev \
      libyaml-cpp-dev libcli11-dev prometheus-cpp-dev libglpk-dev \
      libtorch-dev libgloo-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY carbon/ carbon/
COPY controller/ controller/
# The worker's job-spec schema, which checks submitted specs (no LibTorch).
COPY worker/job_schema.cmake worker/config.h worker/config.cpp worker/
COPY shard/names.cmake shard/
COPY shard/include/shard/strategy_names.h shard/include/shard/
RUN cmake -S . -B /build -G Ninja \
      -DCMAKE_BUILD_TYPE=Release \
      "-DGREENSHARD_SKIP_DIRS=shard;worker" \
      -DGREENSHARD_TESTS=OFF -DGREENSHARD_BENCH=OFF \
 && cmake --build /build --target greenshard-controller greenshard \
 && install -m 0755 /build/controller/greenshard-controller /build/controller/greenshard /usr/local/bin/

FROM debian:12.11-slim AS runtime
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libcpp-httplib0.11 libprometheus-cpp-core1.0 libsqlite3-0 \
      libssl3 libyaml-cpp0.7 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 greenshard \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /var/lib/greenshard \
      --shell /usr/sbin/nologin greenshard \
 && install -d -o 65532 -g 65532 /var/lib/greenshard
COPY --from=build /usr/local/bin/greenshard-controller /usr/local/bin/greenshard /usr/local/bin/
# The shipped 2023 hourly intensity data (regions with `zone:`).
COPY carbon/data/ /usr/share/greenshard/carbon/
ENV GREENSHARD_CARBON_DATA=/usr/share/greenshard/carbon \
    GREENSHARD_DATA_DIR=/var/lib/greenshard \
    GREENSHARD_HOST=0.0.0.0 \
    GREENSHARD_PORT=8080
WORKDIR /var/lib/greenshard
VOLUME ["/var/lib/greenshard"]
EXPOSE 8080
USER 65532:65532
ENTRYPOINT ["greenshard-controller"]
