# rota: the worker daemon and the web UI in one image.
#   docker build -t rota .
#   docker run --rm -e ROTA_REDIS_URL=redis://redis:6379/0 rota worker rota.examples.jobs:pool

FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m venv /opt/rota \
    && /opt/rota/bin/pip install --no-cache-dir .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="rota" \
      org.opencontainers.image.description="A job-queue daemon on Redis"
RUN groupadd --system --gid 10001 rota \
    && useradd --system --uid 10001 --gid rota --home-dir /app --no-create-home rota
COPY --from=build /opt/rota /opt/rota
WORKDIR /app
COPY --chown=rota:rota examples ./examples
ENV PATH=/opt/rota/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ROTA_LOG_FORMAT=json
USER 10001:10001
# Healthy while Redis answers and the namespace can be read.
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
    CMD ["rota", "status", "--json"]
ENTRYPOINT ["rota"]
CMD ["worker", "rota.examples.jobs:pool"]
