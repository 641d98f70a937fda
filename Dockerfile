# The tidings image: every process of a fleet runs it (api, relay, worker, dispatch, migrate).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir .
ENV TIDINGS_HOST=0.0.0.0
ENTRYPOINT ["tidings"]
CMD ["--help"]
