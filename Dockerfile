# syntax=docker/dockerfile:1
# The tidings image: every process of a fleet runs it (api, relay, worker, dispatch, migrate).
# Two stages: the build stage makes wheels of tidings and every dependency; the runtime
# stage installs them offline and keeps neither the source, the wheels nor pip's cache.
# The base is pinned by version and digest (the multi-platform index of
# python:3.11.10-slim-bookworm); bump both together.
ARG PYTHON_IMAGE=python:3.11.10-slim-bookworm@sha256:5148c0e4bbb64271bca1d3322360ebf4bfb7564507ae32dd639322e4952a6b16

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
# The wheels are mounted for this one step (BuildKit), so no layer holds them. Installed
# as root, run as an unprivileged user: the code stays read-only to the process; /data
# (its working directory) is where it may write (the development sink's outbox).
# DL3013 (pin versions in pip): --no-index installs only the wheels of the build stage.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels tidings \
    && useradd --system --uid 10001 --user-group --no-create-home tidings \
    && mkdir /data && chown tidings:tidings /data
USER 10001:10001
WORKDIR /data
ENV TIDINGS_HOST=0.0.0.0 PYTHONUNBUFFERED=1
# The API's liveness (/healthz on TIDINGS_PORT, 8000 by default). Processes without the API
# (relay, worker, dispatch, migrate) have no such endpoint: docker-compose.yml turns the
# check off for them.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('TIDINGS_PORT', '8000'), timeout=2)"]
ENTRYPOINT ["tidings"]
CMD ["--help"]
