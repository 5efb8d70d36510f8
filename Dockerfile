# The agentq image, for machines that reach a registry:
#   docker build -t agentq:0.1.0 .
# With no registry, `agentq images build` makes the same image from the Debian archive
# and PyPI: a debootstrapped rootfs, agentq installed into the venv /opt/agentq, the same
# user and entrypoint.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY agentq agentq
COPY orchestrator orchestrator
COPY workers workers
COPY sandbox sandbox
# A venv at its final path: the runtime stage copies it whole, without pip's caches.
RUN python -m venv /opt/agentq \
 && /opt/agentq/bin/pip install --no-cache-dir . \
 && /opt/agentq/bin/pip uninstall --yes pip

FROM python:${PYTHON_VERSION}-slim
RUN useradd --uid 10001 --user-group --create-home --home-dir /home/agentq \
      --shell /usr/sbin/nologin agentq
COPY --from=build /opt/agentq /opt/agentq
ENV PATH=/opt/agentq/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /home/agentq
ENTRYPOINT ["agentq"]
CMD ["--help"]
