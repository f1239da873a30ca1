# greenshard-controller and the greenshard CLI, slim: no LibTorch (the
# controller never links it). Built by scripts/images.sh with podman:
#
#   scripts/images.sh --only controller     # -> localhost/greenshard-controller:<version>
#
# The base, localhost/greenshard-controller-base:12, is a Debian 12 root
# filesystem that scripts/images.sh makes with mmdebstrap from the machine's
# apt sources: minbase plus ca-certificates and exactly the packages that
# provide the binaries' shared libraries, with the user greenshard
# (65532:65532). No registry is involved. The build context is staged by the
# script: bin/ (the stripped binaries from the build tree, compiled on the
# same Debian release) and carbon/ (carbon/data).
FROM localhost/greenshard-controller-base:12
COPY bin/ /usr/local/bin/
# The shipped 2023 hourly intensity data (regions with `zone:`).
COPY carbon/ /usr/share/greenshard/carbon/
ENV GREENSHARD_CARBON_DATA=/usr/share/greenshard/carbon \
    GREENSHARD_DATA_DIR=/var/lib/greenshard \
    GREENSHARD_HOST=0.0.0.0 \
    GREENSHARD_PORT=8080
WORKDIR /var/lib/greenshard
VOLUME ["/var/lib/greenshard"]
EXPOSE 8080
USER 65532:65532
ENTRYPOINT ["greenshard-controller"]
