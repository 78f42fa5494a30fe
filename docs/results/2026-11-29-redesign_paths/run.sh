#!/bin/bash
# three 20-step GRPO runs side by side on one GPU: pairwise_ref and tournament (the untrained model served as the
# pairwise judge), and the rule recipe with a user-written group reward; run from the project root.
# DRY_RUN=1 bash <this file>: check the three composed configs only (CPU). Writes my_rewards.py at the project root.
# Arguments: more Hydra overrides for the two judged runs (e.g. verl_judge.fail_fast.enable=false).
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)" || exit 20  # the project root
cat > my_rewards.py <<'PY'
"""A user's group reward: right answers ranked by length (recipes/README.md, "Group rewards")."""
from reward_fns.gsm8k import grade


def shortest_right_first(data_sources, solution_strs, ground_truths, extra_infos, **kwargs):
    right = [grade(s, truth) == 1.0 for s, truth in zip(solution_strs, ground_truths)]
    shortest = sorted((len(s), i) for i, s in enumerate(solution_strs) if right[i])
    rank = {i: k + 1 for k, (_, i) in enumerate(shortest)}
    return [{"score": 1.0 / rank[i] if ok else 0.0, "rule_score": float(ok)} for i, ok in enumerate(right)]
PY
OUT_ROOT=${OUT_ROOT:-/tmp/pw}; mkdir -p $OUT_ROOT
SHAPE="data.train_batch_size=16 actor_rollout_ref.rollout.n=8 actor_rollout_ref.actor.ppo_mini_batch_size=8
 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=64
 actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=64 data.max_prompt_length=192 data.max_response_length=192
 actor_rollout_ref.actor.optim.lr=5e-6 actor_rollout_ref.rollout.gpu_memory_utilization=0.15
 actor_rollout_ref.rollout.free_cache_engine=false +actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes=2147483648
 trainer.total_training_steps=20 trainer.test_freq=20 trainer.val_before_train=false trainer.save_freq=-1 data.seed=0"
JUDGE="judge_placement=server verl_judge.judge_server.gpu_memory_utilization=0.1 verl_judge.judge_server.kv_cache_memory_bytes=2147483648 $*"
PAIRWISE="reward.custom_reward_function.path=pkg://reward_fns.pairwise_judge"
GROUP="reward.reward_manager.source=importlib reward.reward_manager.name=GroupRewardManager reward.reward_manager.module.path=pkg://scripts.train.group_reward reward.num_workers=1"
declare -A RECIPE=([pairwise_ref]=gsm8k_local_judge [tournament]=gsm8k_local_judge [user_group]=gsm8k_rule)
declare -A ARGS=(
  [pairwise_ref]="$JUDGE $PAIRWISE ++reward.custom_reward_function.reward_kwargs.mode=pairwise_ref"
  [tournament]="$JUDGE $PAIRWISE ++reward.custom_reward_function.reward_kwargs.mode=tournament $GROUP"
  [user_group]="reward.custom_reward_function.path=pkg://my_rewards reward.custom_reward_function.name=shortest_right_first $GROUP"
)
pids=()
for run in pairwise_ref tournament user_group; do
  OUTPUT_DIR=$OUT_ROOT/$run DATA_DIR=/tmp/data_$run PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} \
    timeout 1500 bash recipes/${RECIPE[$run]}/run.sh $SHAPE ${ARGS[$run]} trainer.experiment_name=proof-$run \
    trainer.rollout_data_dir=$OUT_ROOT/$run/rollouts > $OUT_ROOT/$run.log 2>&1 &
  pids+=($!)
done
rc=0; i=0
for run in pairwise_ref tournament user_group; do wait ${pids[$i]}; r=$?; echo "$run exit $r" | tee -a $OUT_ROOT/exits.txt; [ $r -ne 0 ] && rc=1; i=$((i+1)); done
exit $rc
