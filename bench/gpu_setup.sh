#!/usr/bin/env bash
# The project's stage code on the GPU machine (Python 3.12, torch, transformers 5.17,
# tokenizers, numpy, pandas, pyarrow there; pydantic & co, docstring-parser and our typing-extensions not,
# and no registry; transformers travels at our pin, 5.23, so the stage runs the version it is tested with).
# The cp312 manylinux wheels travel in gpu_wheels/ (ignored by git, named in `carry`); they are installed
# into a scratch folder there, put first on PYTHONPATH.
#
#   here, once (network):  bash bench/gpu_setup.sh download
#   there:                 source bench/gpu_setup.sh && python3 bench/af_gpu.py --out "$OUT"
#
# Sourced: it sets PYTHONPATH and the offline switches in the caller's shell, and returns non-zero when the
# stage modules do not import (nothing is left half-done silently).

_csk_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# the pins of constraints.txt: the versions the project is tested with
_csk_wheels="pydantic==2.14.3 pydantic_core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5
docstring_parser==0.18.0 typing_extensions==4.16.0 transformers==5.23.0"

if [ "${1:-}" = "download" ]; then
    mkdir -p "$_csk_root/gpu_wheels"
    # shellcheck disable=SC2086
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 -d "$_csk_root/gpu_wheels" $_csk_wheels
    du -sh "$_csk_root/gpu_wheels"
else
    _csk_site="${CSK_GPU_SITE:-/tmp/csk-gpu-site}"
    if ! ls "$_csk_root"/gpu_wheels/*.whl >/dev/null 2>&1; then
        echo "gpu_setup: no wheels in $_csk_root/gpu_wheels (run 'bash bench/gpu_setup.sh download' here and carry gpu_wheels)" >&2
        return 1 2>/dev/null || exit 1
    fi
    python3 -m pip install --quiet --no-index --no-deps --target "$_csk_site" "$_csk_root"/gpu_wheels/*.whl || {
        return 1 2>/dev/null || exit 1; }
    export PYTHONPATH="$_csk_site:$_csk_root${PYTHONPATH:+:$PYTHONPATH}"
    export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
    python3 -c "import tasks.distractors.adversarial, tasks.distractors.candidate_filter, tasks.seq2seq" || {
        echo "gpu_setup: the stage modules do not import (above)" >&2; return 1 2>/dev/null || exit 1; }
    echo "gpu_setup: $(python3 -c 'import sys, torch, transformers; print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)'); site $_csk_site" >&2
fi
