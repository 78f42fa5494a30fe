#!/usr/bin/env bash
# The README's main job, for a fresh machine.
#
#   bash scripts/main.sh [arguments...]
#
# * With a GPU (nvidia-smi works): `python -m scripts.lab.policy_learns --out outputs/main`: SmolLM2-135M-Instruct
#   (materialised offline) as judge and policy on the word-problem testbed (data_prep.word_problems): the
#   policy's warm start, the judge trained and evaluated before / after, then the policy trained 100 GRPO steps
#   with the rule and with the trained judge side by side, held-out accuracy before / after each
#   (outputs/main/report.md). Resumable: run it again. Arguments go to it (python -m scripts.lab.policy_learns --help;
#   --testbed none and MODEL=... train on GSM8K itself).
# * Without a GPU: DRY_RUN=1 of every recipe (data built, config validated against verl's schema) and of the
#   experiment, then a clear note that training needs a GPU. Exit 0 when every dry run passes. The arguments go to
#   the experiment's dry run; the recipes get them too when every one is a Hydra override (key=value).
# The launcher's environment variables (MODEL, N_GPUS, PYTHON, ...: python -m scripts.launch --knobs)
# may be set.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PYTHON=$(bash scripts/launch.sh --print-python | tail -n 1)
export PYTHON
echo "[main] interpreter: $PYTHON"
echo "[main] GSM8K: ${GSM8K_DIR:-../shared/data/gsm8k when present, else the HF hub (openai/gsm8k) when reachable, else the word-problem testbed}"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  exec "$PYTHON" -m scripts.lab.policy_learns --out outputs/main "$@"
fi

echo "[main] no GPU (nvidia-smi fails): dry-running every recipe (config checked against verl's schema)"
recipes=(judge_pointwise judge_pairwise gsm8k_rule gsm8k_api_judge gsm8k_local_judge judge_to_reward)
failed=()
recipe_args=("$@")
for a in "$@"; do
  case "$a" in
    -*) recipe_args=(); echo "[main] the arguments are policy_learns options ($a): the recipes are dry-run without them"; break ;;
  esac
done
for r in "${recipes[@]}"; do
  echo "[main] ---- DRY_RUN=1 bash recipes/$r/run.sh"
  extra=()
  if [ "$r" = gsm8k_api_judge ] && [ -z "${JUDGE_BASE_URL:-}" ] && [ -z "${OPENAI_API_KEY:-}" ]; then
    # its default endpoint is the OpenAI API, which needs OPENAI_API_KEY: check the recipe against a local one
    echo "[main] OPENAI_API_KEY is unset: gsm8k_api_judge is checked against a local endpoint (JUDGE_BASE_URL=http://127.0.0.1:8000/v1)"
    extra=(env JUDGE_BASE_URL=http://127.0.0.1:8000/v1)
  fi
  if DRY_RUN=1 "${extra[@]}" bash "recipes/$r/run.sh" ${recipe_args[@]+"${recipe_args[@]}"}; then
    echo "[main] $r: dry run OK"
  else
    echo "[main] $r: dry run FAILED"
    failed+=("$r")
  fi
done
echo "[main] ---- DRY_RUN=1 python -m scripts.lab.policy_learns --out outputs/main (its rule and judge runs)"
if DRY_RUN=1 "$PYTHON" -m scripts.lab.policy_learns --out outputs/main "$@"; then
  echo "[main] policy_learns: dry run OK"
else
  echo "[main] policy_learns: dry run FAILED"
  failed+=(policy_learns)
fi
recipes+=(policy_learns)
echo "[main] ================================================================"
echo "[main] dry runs: $(( ${#recipes[@]} - ${#failed[@]} ))/${#recipes[@]} passed${failed:+; failed: ${failed[*]}}"
echo "[main] TRAINING NEEDS A GPU: nothing was trained on this machine. On a machine with an NVIDIA GPU"
echo "[main] the same command runs the policy_learns experiment (see README)."
[ ${#failed[@]} -eq 0 ]
