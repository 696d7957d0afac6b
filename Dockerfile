# The optplan image: `optplan controller` by default (deploy/40-deployment.yaml), any optplan command
# otherwise (`docker run --rm -v $PWD:/data optplan:0.1.0 repack /data/snap.yaml`).
# Build: docker build -t optplan:0.1.0 .
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY optplan ./optplan
# The package and its dependencies only (no test extras), into a prefix copied whole below.
RUN pip install --no-cache-dir --no-compile --prefix=/install .

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib
COPY --from=build /install /usr/local
RUN groupadd --system --gid 10001 optplan \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin optplan
# Numeric, so that Kubernetes' runAsNonRoot can check it.
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["optplan"]
CMD ["controller"]
