# greenshard-worker on Debian's LibTorch (CPU), for CPU clusters and the image
# test. Built by scripts/images.sh with podman:
#
#   scripts/images.sh --only worker-cpu     # -> localhost/greenshard-worker-cpu:<version>
#
# The base, localhost/greenshard-worker-cpu-base:12, is a Debian 12 root
# filesystem that scripts/images.sh makes with mmdebstrap from the machine's
# apt sources: minbase plus ca-certificates and exactly the packages that
# provide the worker's shared libraries (libtorch1.13, libgloo0, libcurl4,
# libsentencepiece0, ...), with the user greenshard (65532:65532). The build
# context is staged by the script: bin/ (the stripped worker and its
# SentencePiece module, which it loads from next to itself) and carbon/.
# GPU clusters use dockerfiles/worker.Dockerfile (CUDA LibTorch, NGC base).
FROM localhost/greenshard-worker-cpu-base:12
COPY bin/ /opt/greenshard/bin/
COPY carbon/ /usr/share/greenshard/carbon/
ENV PATH=/opt/greenshard/bin:/usr/local/bin:/usr/bin:/bin \
    GREENSHARD_CARBON_DATA=/usr/share/greenshard/carbon
WORKDIR /workspace
USER 65532:65532
ENTRYPOINT ["greenshard-worker"]
