#!/usr/bin/env bash
# Judge cost at anchor shapes: a policy with the SmolLM2-360M architecture rewarded by a judge with
# the SmolLM2-1.7B architecture, both with random weights and the SmolLM2 tokenizer (nothing is downloaded), timed
# by the cost bench (python -m scripts.lab.bench.judge_cost): recipes/gsm8k_rule and recipes/gsm8k_local_judge with
# identical settings on GSM8K prompts, one run after the other.
#
#   PYTHON=python3 GSM8K_DIR=/data/gsm8k bash scripts/lab/bench/shapes.sh          # one GPU: rule_1gpu vs colocated
#   PYTHON=python3 GSM8K_DIR=/data/gsm8k GPUS=2 bash scripts/lab/bench/shapes.sh   # two GPUs: rule_pool vs pool
#   STEPS=8 bash scripts/lab/bench/shapes.sh data.train_batch_size=32              # arguments: Hydra overrides, every run
#   bash scripts/lab/bench/shapes.sh --rounds 2 -- data.train_batch_size=32        # or the bench's options first
#
# 1. Makes the two models unless they are there (python -m scripts.lab.bench.random_model, built on the GPU when there
#    is one): MODELS_DIR/random-smollm2-360m (policy) and MODELS_DIR/random-smollm2-1.7b (judge), with the tokenizer
#    files, generation config and bos/eos/pad ids of TOKENIZER_FROM. POLICY_DIR / JUDGE_DIR: use these folders as
#    they are instead (nothing is made).
# 2. Runs python -m scripts.lab.bench.judge_cost with MODEL=<policy>, --steps STEPS, --out COST_DIR, the runs below as
#    its arms (--arm NAME=RECIPE:OVERRIDES, --arms RUNS), ratios to the rule run (--base), every run on the same
#    GPU(s) one after the other (--gpus: the first GPUS ids of CUDA_VISIBLE_DEVICES, default 0 or 0,1;
#    --gpus-per-arm GPUS), then the arguments. Besides the bench's shared settings (trainer.n_gpus_per_node=1 among
#    them), every run gets data.max_response_length=512 (policy replies: random weights almost never stop before the
#    cap) and verl_judge.fail_fast.enable=false (a random judge gives no verdict, every reply is a parse failure, which
#    would stop the run); each judge run also reward.reward_model.model_path=<judge>,
#    +reward.custom_reward_function.reward_kwargs.max_tokens=256 (the judge's reply cap that reward_fns/llm_judge.py
#    sends) and reward.reward_model.rollout.response_length=256 (the judge server's default cap, kept the same).
#    GPUS=1: runs rule_1gpu, colocated: recipes/gsm8k_local_judge as it is (the judge shares the policy's GPU,
#      kept awake between reward stages, CUDA graphs), colocated_sleep: the same with the judge put to sleep after
#      each reward stage and woken for the next (reward.reward_model.rollout.free_cache_engine=true, verl's default)
#      and colocated_eager: sleeping and eager as well (reward.reward_model.rollout.enforce_eager=true: verl's
#      defaults for the judge, the setting before, for the before/after), and server: judge_placement=server (the
#      launcher serves the judge with vLLM's OpenAI server on the same GPU, verl_judge.judge_server's settings; no
#      reward model in verl's sense, so the reward is computed in the agent loop as each reply finishes, as in a pool run).
#    GPUS=2: runs rule_pool and pool: the judge on a pool of its own GPU (reward.reward_model.enable_resource_pool=true
#      reward.reward_model.n_gpus_per_node=1 reward.reward_model.nnodes=1), kept awake
#      (reward.reward_model.rollout.free_cache_engine=false: verl 0.9.1 puts the judge to sleep at start and wakes it
#      only in the colocated reward stage, which a pool run never enters). verl's agent loop then scores each reply as
#      soon as it is generated: the judge's time is inside timing_s/gen, timing_s/reward is about 0; read timing_s/step.
#      And server_gpu1: judge_placement=server with the server on GPU 1 (verl_judge.judge_server.devices=1), the
#      policy on GPU 0.
# 3. The bench prints COST_DIR/cost.md (and writes cost.json): median stage times after step 1, their ratio to the rule run.
#
# Knobs: GPUS (1 | 2, default 1); STEPS (5); RUNS (which of the runs, space-separated, in order; default all);
# MODELS_DIR (outputs/shapes/models); COST_DIR (outputs/shapes/<GPUS>gpu);
# TOKENIZER_FROM (default $MODEL, else the folder `python -m data_prep.model` materialises);
# POLICY_DIR, JUDGE_DIR (see 1); PYTHON (an interpreter with verl + vLLM, e.g. python3; default: scripts/launch.sh's);
# the launcher's variables (GSM8K_DIR, DATA_DIR, ...) are passed on. DRY_RUN=1: each run is only checked.
# Exit status: the bench's; 2 for a bad GPUS, 1 when a model cannot be made.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
source "$ROOT/scripts/lib.sh"
usage_if_help "$0" "$@"
GPUS=${GPUS:-1}
extra_runs=""
case $GPUS in
  1) rule=rule_1gpu judge=colocated extra_runs="colocated_sleep colocated_eager server" ;;
  2) rule=rule_pool judge=pool extra_runs=server_gpu1 ;;
  *) echo "shapes: GPUS=$GPUS: 1 (the judge colocated with the policy) or 2 (the judge on its own GPU)" >&2; exit 2 ;;
esac
MODELS_DIR=${MODELS_DIR:-$ROOT/outputs/shapes/models}
STEPS=${STEPS:-5} COST_DIR=${COST_DIR:-$ROOT/outputs/shapes/${GPUS}gpu}
export PYTHON=${PYTHON:-$(bash "$ROOT/scripts/launch.sh" --print-python)}
say() { echo "[shapes $(date +%H:%M:%S)] $*"; }

make_model() {  # ARCH FOLDER: print the folder (made unless it already holds this model)
  local src=${TOKENIZER_FROM:-${MODEL:-}}
  if [ -z "$src" ]; then src=$(py_root -m data_prep.model | tail -n 1) || return 1; fi
  py_root -m scripts.lab.bench.random_model --arch "$1" --tokenizer-from "$src" --out "$2" >&2 || return 1
  printf '%s\n' "$2"
}
policy=${POLICY_DIR:-}; judge_dir=${JUDGE_DIR:-}
export -n POLICY_DIR JUDGE_DIR  # knobs of this script, not passed on
[ -n "$policy" ] || policy=$(make_model smollm2-360m "$MODELS_DIR/random-smollm2-360m") || exit 1
[ -n "$judge_dir" ] || judge_dir=$(make_model smollm2-1.7b "$MODELS_DIR/random-smollm2-1.7b") || exit 1

every=data.max_response_length=512,verl_judge.fail_fast.enable=false
settings="$every,reward.reward_model.model_path=$judge_dir"
settings+=",+reward.custom_reward_function.reward_kwargs.max_tokens=256,reward.reward_model.rollout.response_length=256"
arms=(--arm "$rule=gsm8k_rule:$every")
if [ "$GPUS" = 1 ]; then
  sleep_=reward.reward_model.rollout.free_cache_engine=true
  arms+=(--arm "$judge=gsm8k_local_judge:$settings" --arm "colocated_sleep=gsm8k_local_judge:$settings,$sleep_"
         --arm "colocated_eager=gsm8k_local_judge:$settings,$sleep_,reward.reward_model.rollout.enforce_eager=true"
         --arm "server=gsm8k_local_judge:$settings,judge_placement=server")
else
  pool=reward.reward_model.enable_resource_pool=true,reward.reward_model.n_gpus_per_node=1,reward.reward_model.nnodes=1
  arms+=(--arm "$judge=gsm8k_local_judge:$settings,$pool,reward.reward_model.rollout.free_cache_engine=false"
         --arm "server_gpu1=gsm8k_local_judge:$settings,judge_placement=server,verl_judge.judge_server.devices=1")
fi
RUNS=${RUNS:-$rule $judge $extra_runs}
base=(); [[ " $RUNS " == *" $rule "* ]] && base=(--base "$rule")  # no rule run: no ratios
gpus=$(printf '%s' "${CUDA_VISIBLE_DEVICES:-0,1}" | cut -d, -f1-"$GPUS")
say "policy $policy, judge $judge_dir; runs $RUNS ($STEPS steps, GPU $gpus) -> $COST_DIR"
MODEL=$policy PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" exec "$PYTHON" -m scripts.lab.bench.judge_cost \
  --steps "$STEPS" --out "$COST_DIR" --gpus "$gpus" --gpus-per-arm "$GPUS" --arms "$(echo $RUNS | tr ' ' ,)" \
  "${base[@]}" "${arms[@]}" "$@"
