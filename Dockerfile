# syncd in a container: state/ and config/ are volumes, the process runs as a non-root user.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY syncd ./syncd
RUN pip install . && useradd --create-home --uid 10001 syncd && mkdir -p /app/state /app/config && chown -R syncd /app/state /app/config
USER syncd
VOLUME ["/app/state", "/app/config"]
EXPOSE 8787
# Until the daemon lands, the image serves the built-in emulator with generated data.
ENTRYPOINT ["syncd"]
CMD ["emulator", "serve", "--host", "0.0.0.0", "--generate", "orgs=2", "--token", "demo-token"]
