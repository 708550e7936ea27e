# syncd daemon image: `syncd serve` with its control API on port 8790.
#
#   docker build -t syncd .
#   docker run -d --name syncd --stop-timeout 45 -p 127.0.0.1:8790:8790 \
#       -v syncd-state:/app/state -v "$PWD/config:/app/config:ro" \
#       -e SYNCD_DAEMON__TOKEN=... -e SRC_TOKEN=... -e DST_TOKEN=... syncd
#
# The configuration is /app/config/syncd.toml (see config/syncd.container.toml); the state
# (mirror, backups, run history) goes to the /app/state volume. The process runs as uid 10001.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SYNCD_STATE_DIR=/app/state

# The user and the volume folders first: they do not change when the code does.
RUN groupadd --gid 10001 syncd \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /app --shell /usr/sbin/nologin syncd \
    && mkdir -p /app/state /app/config \
    && chown syncd:syncd /app/state /app/config

# A regular (non-editable) install of the package, as docs/guides/docker.md says, from a build folder
# that is removed afterwards: /app holds only the volumes.
COPY pyproject.toml README.md /tmp/src/
COPY syncd /tmp/src/syncd
RUN pip install /tmp/src && rm -rf /tmp/src

WORKDIR /app

USER 10001:10001
VOLUME ["/app/state", "/app/config"]
EXPOSE 8790 8791

# /healthz needs no token. slim has no curl: ask with Python's urllib (any error -> exit 1).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8790/healthz', timeout=4).status == 200 else 1)"]

# SIGTERM (docker stop) gives running jobs daemon.shutdown_deadline (30 s by default) to end:
# give the container more than that with `docker run --stop-timeout 45` (docker's default is 10 s).
ENTRYPOINT ["syncd", "serve"]
CMD ["--config", "/app/config/syncd.toml"]
