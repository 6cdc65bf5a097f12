# lavaflow: scheduler, controller and webhook in one image; the first argument picks the component:
#   docker build -t lavaflow:0.1.0 .
#   (Kubernetes) args: ["scheduler", ...] | ["controller", ...] | ["webhook", ...]
# The dashboard's image adds its extra (Starlette, uvicorn, matplotlib), kept out of the scheduler's:
#   docker build --target dashboard -t lavaflow:0.1.0-dashboard .      args: ["dashboard", ...]
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[kube,dashboard]'

FROM python:3.11-slim AS dashboard
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels 'lavaflow[kube,dashboard]' && rm -rf /wheels
RUN useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin lavaflow
USER 65532:65532
ENV PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/matplotlib
ENTRYPOINT ["lavaflow"]
CMD ["dashboard", "--help"]

# The default target (last): the scheduler, controller and webhook image.
FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels 'lavaflow[kube]' && rm -rf /wheels
# A non-root user (the chart runs as 65532 with a read-only root filesystem).
RUN useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin lavaflow
USER 65532:65532
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["lavaflow"]
CMD ["scheduler", "--help"]
