# A worker image for CloneMem's Prefect deployments on a Docker or Kubernetes work pool (README:
# "Scaling out"). It holds the project and its pinned dependencies; the worker starts each flow run in a
# container of this image, which runs the deployment's entrypoint from /opt/clonemem.
#
#   docker build -t clonemem:latest .
#
# Not built by the tests (their machine has no Docker engine); the same install steps run in CI through
# `make test`. torch is pinned to its CPU build: PyPI's default Linux torch wheel pulls the CUDA
# libraries, so give pip a folder or index holding the CPU wheel, e.g.
#   docker build --build-arg PIP_EXTRA="--find-links /wheels" ...   (with the wheel copied into the context)
FROM python:3.11-slim

ARG PIP_EXTRA=""
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CLONEMEM_PROJECT_DIR=/opt/clonemem \
    PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1

WORKDIR /opt/clonemem

# dependencies first (a layer that survives code changes), then the project itself
COPY pyproject.toml constraints.txt ./
RUN pip install $PIP_EXTRA -c constraints.txt $(python -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
COPY . .
# bundles at s3:// or gs:// need s3fs or gcsfs: add `pip install s3fs` (or gcsfs) here for those
RUN pip install $PIP_EXTRA --no-deps -e . && python -c "import clonemem.flows.pipeline, clonemem.flows.scaleout"

# the image is a flow-run image: the worker (process, docker or kubernetes) decides what runs
CMD ["prefect", "--help"]
