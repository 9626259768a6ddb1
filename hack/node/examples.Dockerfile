# syntax=docker/dockerfile:1
# Zonda's image plus the repository's examples/ package (operators' callables, triggers,
# timetables), so the example DAGs run as real pods: the "FROM zonda with your code" recipe of
# docs/image.md, built by hack/node/build-image.sh --examples.
ARG ZONDA_IMAGE=zonda:latest
FROM ${ZONDA_IMAGE}

USER 0
# The build context is examples/ itself (the repository's .dockerignore keeps it out of the main image).
COPY . /opt/zonda-examples/examples/
ENV PYTHONPATH=/opt/zonda-examples
USER 10001:10001
