# CPU image of the Attention Explorer app (GPU hosts: deploy/Dockerfile.gpu; several replicas: deploy/).
#   docker build -t attention-explorer .
#   docker run --rm -p 8501:8501 -v attn-cache:/cache attention-explorer      # then open http://localhost:8501
# Limits, settable with `docker run -e`:
#   ATTN_EXPLORER_MEMORY_LIMIT  bytes one computation may use (default 4 GiB); keep it under the container's memory
#   ATTN_EXPLORER_JOB_SECONDS   seconds before a computation is cancelled (default 60)
#   ATTN_EXPLORER_CACHE_BYTES   size bound of the result cache in /cache (default 1 GiB)
FROM python:3.11-slim

# ATTN_EXPLORER_MALLOC_MMAP_BYTES: large arrays are unmapped when freed, so a class on a small host stays near what
# is live (load benchmark: about 1.0 GiB after each wave instead of 1.2-2.4 GiB); computing sessions finish later.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    HF_HUB_OFFLINE=1 \
    ATTN_EXPLORER_CACHE_DIR=/cache \
    ATTN_EXPLORER_MEMORY_LIMIT=4294967296 \
    ATTN_EXPLORER_JOB_SECONDS=60 \
    ATTN_EXPLORER_MALLOC_MMAP_BYTES=1048576

WORKDIR /app

# Dependencies first so code edits reuse this layer. The extra index supplies the CPU build of torch==2.13.0
# (plain PyPI would pull the CUDA build and several GB of nvidia-* wheels).
COPY requirements.txt .
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu -r requirements.txt

COPY . .

# Numeric, non-root user with a home directory (Streamlit and Hugging Face write small caches under $HOME).
# /cache is created here so a fresh named volume inherits the app user's ownership.
RUN useradd --create-home --uid 10001 --user-group app \
    && mkdir -p /cache \
    && chown 10001:10001 /cache
USER 10001
# The shared result cache: mount one volume into every replica so a link computed once is a hit everywhere.
VOLUME ["/cache"]

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]
ENTRYPOINT ["streamlit", "run", "deploy/serve.py", "--server.headless", "true", "--server.address", "0.0.0.0", "--server.port", "8501", "--server.fileWatcherType", "none"]
