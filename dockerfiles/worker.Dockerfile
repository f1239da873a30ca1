# greenshard-worker built against a CUDA LibTorch with NCCL.
#
#   docker build -f dockerfiles/worker.Dockerfile -t greenshard-worker:0.1.0-cuda12.8 .
#
# Build stage: NVIDIA's PyTorch container (Ubuntu 24.04, CUDA 12.8, PyTorch
# built with the C++11 ABI, NCCL) plus the Ubuntu packages GreenShard uses.
# Runtime stage: the CUDA runtime image of the same CUDA version, with the
# exact shared libraries the binary was linked against copied next to it.
# Base images are pinned to exact version tags.

FROM nvcr.io/nvidia/pytorch:25.01-py3 AS build
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      cmake ninja-build pkg-config \
      libgloo-dev nlohmann-json3-dev libcpp-httplib-dev libssl-dev libcurl4-openssl-dev \
      libyaml-cpp-dev libcli11-dev prometheus-cpp-dev libglpk-dev libsentencepiece-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY carbon/ carbon/
COPY shard/ shard/
COPY worker/ worker/
RUN TORCH_PREFIX="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')" \
 && cmake -S . -B /build -G Ninja \
      -DCMAKE_BUILD_TYPE=Release \
      -DGREENSHARD_CUDA=ON \
      -DCMAKE_PREFIX_PATH="${TORCH_PREFIX}" \
      "-DGREENSHARD_SKIP_DIRS=controller" \
      -DGREENSHARD_TESTS=OFF -DGREENSHARD_BENCH=OFF \
 && cmake --build /build --target greenshard-worker greenshard_spm \
 && install -D -m 0755 /build/worker/greenshard-worker /opt/greenshard/bin/greenshard-worker \
 && install -m 0644 /build/worker/libgreenshard_spm.so /opt/greenshard/bin/libgreenshard_spm.so
# Bundle every shared library the worker and its SentencePiece module
# (libgreenshard_spm.so, dlopened from next to the binary) resolve to
# (LibTorch, NCCL, cuDNN, cuBLAS, libsentencepiece, ...) except the C library
# and the driver (libcuda comes from the host through the NVIDIA container
# runtime).
RUN mkdir -p /opt/greenshard/lib \
 && ldd /opt/greenshard/bin/greenshard-worker /opt/greenshard/bin/libgreenshard_spm.so \
    | awk '/=> \// {print $3}' \
    | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libnvidia-[^/]*)\.so' \
    | sort -u | xargs -r -I{} cp -L {} /opt/greenshard/lib/

FROM nvidia/cuda:12.8.0-runtime-ubuntu24.04 AS runtime
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 greenshard \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /workspace \
      --shell /usr/sbin/nologin greenshard \
 && install -d -o 65532 -g 65532 /workspace /checkpoints
COPY --from=build /opt/greenshard/ /opt/greenshard/
COPY carbon/data/ /usr/share/greenshard/carbon/
ENV PATH=/opt/greenshard/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/greenshard/lib:/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \
    GREENSHARD_CARBON_DATA=/usr/share/greenshard/carbon \
    NCCL_DEBUG=WARN
WORKDIR /workspace
EXPOSE 9400 29500
USER 65532:65532
ENTRYPOINT ["greenshard-worker"]
