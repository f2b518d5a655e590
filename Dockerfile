# wyoming-hayakoe: Home Assistant add-on image, also usable as a plain container.
#
# Classic Dockerfile syntax only (no BuildKit-only features), so the Supervisor,
# the legacy Docker builder and buildah all build it. The voices are downloaded
# here, at build time, so the running container needs no network.
#
# Build arguments:
#   BUILD_FROM          base image; Home Assistant's multi-arch Debian base
#   HAYAKOE_VOICES      voices to put into the image, separated by spaces
#   HAYAKOE_REPO        Hugging Face repo the voices come from
#   HAYAKOE_REVISION    branch, tag or commit of that repo (empty: main)
#   HAYAKOE_MODELS_DIR  folder inside the build context (and not excluded by
#                       .dockerignore), in the same layout as the hub repo, to
#                       take the models from instead of the hub (offline
#                       builds); empty: download
ARG BUILD_FROM=ghcr.io/home-assistant/base-debian:trixie

# --------------------------------------------------------------------------
# Build stage: the virtual environment and the models. Only those two folders
# are carried over to the final image.
# --------------------------------------------------------------------------
FROM ${BUILD_FROM} AS build

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        python3 \
        python3-venv \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /usr/src/wyoming-hayakoe

# Layers are ordered so that a change to the package's code reuses the
# dependencies and the models: first the dependencies (from pyproject.toml),
# then the models, then the package itself.
COPY pyproject.toml ./
RUN python3 -m venv /opt/wyoming-hayakoe \
    && python3 -c 'import sys, tomllib; print(*tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"], sep="\n")' \
        pyproject.toml > /tmp/requirements.txt \
    && /opt/wyoming-hayakoe/bin/pip install --no-cache-dir --disable-pip-version-check \
        -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

ARG HAYAKOE_VOICES="jvnv-F1-jp"
ARG HAYAKOE_REPO="lemondouble/hayakoe"
ARG HAYAKOE_REVISION=""
ARG HAYAKOE_MODELS_DIR=""
# The local model folder, if one is given (otherwise this copies a file that
# is always there, and the next step ignores it).
COPY ${HAYAKOE_MODELS_DIR:-pyproject.toml} /tmp/models/
RUN if [ -n "${HAYAKOE_MODELS_DIR}" ]; then \
        mkdir -p /usr/share/hayakoe/onnx/speakers \
        && cp -a /tmp/models/bert /usr/share/hayakoe/ \
        && cp -a /tmp/models/onnx/bert /usr/share/hayakoe/onnx/ \
        && for voice in ${HAYAKOE_VOICES}; do \
            if [ -d "/tmp/models/onnx/speakers/${voice}" ]; then \
                cp -a "/tmp/models/onnx/speakers/${voice}" /usr/share/hayakoe/onnx/speakers/; \
            fi; \
        done; \
    else \
        set -- "bert/tokenizer/*" "onnx/bert/q8/*" \
        && for voice in ${HAYAKOE_VOICES}; do set -- "$@" "onnx/speakers/${voice}/*"; done \
        && HF_HUB_DISABLE_TELEMETRY=1 /opt/wyoming-hayakoe/bin/python -c \
            'import sys; from huggingface_hub import snapshot_download; snapshot_download(repo_id=sys.argv[1], revision=sys.argv[2] or None, local_dir=sys.argv[3], allow_patterns=sys.argv[4:])' \
            "${HAYAKOE_REPO}" "${HAYAKOE_REVISION}" /usr/share/hayakoe "$@"; \
    fi \
    && rm -rf /tmp/models /usr/share/hayakoe/.cache

COPY README.md LICENSE ./
COPY wyoming_hayakoe ./wyoming_hayakoe
# The package itself, then its own offline check that every voice is complete.
RUN /opt/wyoming-hayakoe/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps . \
    && set -- \
    && for voice in ${HAYAKOE_VOICES}; do set -- "$@" --voice "${voice}"; done \
    && HF_HUB_OFFLINE=1 /opt/wyoming-hayakoe/bin/wyoming-hayakoe-download "$@" \
        --repo "${HAYAKOE_REPO}" --data-dir /usr/share/hayakoe \
    && rm -rf /usr/share/hayakoe/.cache

# --------------------------------------------------------------------------
# Final image
# --------------------------------------------------------------------------
FROM ${BUILD_FROM}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        python3 \
    && rm -rf /var/lib/apt/lists/*

COPY --from=build /opt/wyoming-hayakoe /opt/wyoming-hayakoe
COPY --from=build /usr/share/hayakoe /usr/share/hayakoe
COPY addon/rootfs /

# HF_HUB_OFFLINE: never reach the hub unless asked to (the add-on's run script
# lifts it only to fetch a voice the user chose that is not installed).
# The server keeps the models as optimized for this machine in its --cache-dir
# (made at the first start, about 720 MB for one voice). The add-on passes
# /data/cache. Run as a plain container, the default is
# /root/.cache/wyoming-hayakoe inside the container, so it is made again each
# time the container is recreated: give --cache-dir a folder on a volume.
ENV PATH="/opt/wyoming-hayakoe/bin:${PATH}" \
    HAYAKOE_IMAGE_DATA_DIR=/usr/share/hayakoe \
    ORT_DISABLE_TELEMETRY=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    HF_HUB_OFFLINE=1 \
    PYTHONUNBUFFERED=1

ARG BUILD_ARCH=""
ARG BUILD_VERSION="0.1.0"
LABEL \
    io.hass.type="app" \
    io.hass.name="HayaKoe" \
    io.hass.version="${BUILD_VERSION}" \
    io.hass.arch="${BUILD_ARCH}" \
    org.opencontainers.image.title="wyoming-hayakoe" \
    org.opencontainers.image.description="Japanese text to speech (HayaKoe voices) over the Wyoming protocol" \
    org.opencontainers.image.version="${BUILD_VERSION}" \
    org.opencontainers.image.source="https://github.com/wyoming-hayakoe/wyoming-hayakoe" \
    org.opencontainers.image.licenses="AGPL-3.0-only"

WORKDIR /
EXPOSE 10200/tcp

HEALTHCHECK --interval=1m --timeout=30s --start-period=10m --retries=3 \
    CMD ["python3", "-m", "wyoming_hayakoe.server.health", "--uri", "tcp://127.0.0.1:10200"]
