#!/bin/bash
# The judge's placements on the testbed's short steps: a trained pointwise judge, then 20-step runs started in the
# same second on one GPU, every run reusing the judge's stages. Run from the checkout's root. The first call trains
# the judge (the judge's stages of policy_learns and a 2-step judge run, in $OUT/judge); each call then runs one
# repetition of $ARMS. The three repetitions kept here:
#   REP=1 ARMS="rule resident colocated server route" bash run.sh   # colocated and server ran out of GPU memory
#   REP=2 ARMS="server colocated rule" bash run.sh
#   REP=3 ARMS="rule resident colocated" bash run.sh
OUT=${OUT:-outputs/judge_cost_placements}; REP=${REP:-1}; ARMS=${ARMS:-rule resident colocated server route}
PY=${PYTHON:-python3}; STAGE="--eval-questions 32 --skip-eval --kv-cache-gb 2"; mkdir -p "$OUT"
[ -e "$OUT/t0" ] || date +%s > "$OUT/t0"; at() { echo "at $(( $(date +%s) - $(cat "$OUT/t0") )) s"; }
if [ ! -e "$OUT/judge/judge_model" ]; then
  $PY -m scripts.lab.policy_learns --out "$OUT/judge" --arms judge --no-rule --steps 2 --test-freq 2 $STAGE \
    > "$OUT/train.log" 2>&1; echo "train EXIT=$? $(at)" >> "$OUT/exits.txt"
fi
declare -A ARM=(
  [rule]="--arms rule"
  [resident]="--arms judge --judge-placement colocated reward.custom_reward_function.path=pkg://reward_fns.gsm8k"
  [colocated]="--arms judge --judge-placement colocated"
  [server]="--arms judge"
  [route]="--arms route"
)
PL="$PY -m scripts.lab.policy_learns --reuse $OUT/judge --steps 20 --test-freq 20 --parallel 1 $STAGE"
echo "rep $REP order: $ARMS $(at)" >> "$OUT/exits.txt"
for a in $ARMS; do
  ( $PL --out "$OUT/rep$REP/$a" ${ARM[$a]} > "$OUT/rep${REP}_$a.log" 2>&1; echo "rep$REP $a EXIT=$?" >> "$OUT/exits.txt" ) &
done
wait; echo "rep $REP done $(at)" >> "$OUT/exits.txt"
