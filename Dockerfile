# The tidings image: every process of a fleet runs it (api, relay, worker, dispatch, migrate).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
# Installed as root, run as an unprivileged user: the code stays read-only to the process;
# /data (its working directory) is where it may write (the development sink's outbox).
RUN pip install --no-cache-dir . \
    && useradd --system --uid 10001 --user-group --no-create-home tidings \
    && mkdir /data && chown tidings:tidings /data
USER tidings
WORKDIR /data
ENV TIDINGS_HOST=0.0.0.0
# The API's liveness (/healthz on TIDINGS_PORT, 8000 by default). Processes without the API
# (relay, worker, dispatch, migrate) have no such endpoint: docker-compose.yml turns the
# check off for them.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('TIDINGS_PORT', '8000'), timeout=2)"]
ENTRYPOINT ["tidings"]
CMD ["--help"]
