# syntax=docker/dockerfile:1
# The zonda image: the controller, the triggerer and the task runner (`zonda run-task`) in one.
# Extend it with your operators, triggers and timetables: FROM zonda, pip install your package
# (docs/image.md).
ARG PYTHON_IMAGE=python:3.11-slim

# ---------------------------------------------------------------------------------------- builder
# Builds the zonda wheel and the wheels of all its dependencies, so the final stage installs from
# local files only, with no compiler and no network.
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps the rest of the context out).
COPY pyproject.toml README.md ./
COPY zonda/ zonda/
COPY controller/ controller/
# With the dill extra (serializer="dill" tasks: docs/image.md).
RUN pip wheel --wheel-dir /wheels ".[dill]"

# ------------------------------------------------------------------------------------------ final
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="zonda" \
      org.opencontainers.image.description="Airflow-style DAG orchestration native to Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A fixed numeric uid/gid: Kubernetes' runAsNonRoot can only verify a numeric USER.
RUN groupadd --system --gid 10001 zonda \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/zonda --create-home \
       --shell /usr/sbin/nologin zonda

# The wheels are bind-mounted from the builder, so they never become a layer of this image. With
# --no-index, "zonda[dill]" can only be the wheel built above: its version is pinned by that.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels "zonda[dill]"

USER 10001:10001
WORKDIR /home/zonda

ENTRYPOINT ["zonda"]
CMD ["controller"]
