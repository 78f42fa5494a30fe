#!/bin/bash
# The judge's cost on the testbed's short steps: rule, colocated and colocated with the deferred reward, 20 steps
# each, started the same second on one GPU, every run reusing the stages of a finished `bash scripts/main.sh`
# (outputs/main: testbed, the policy's warm start, the trained pointwise judge). Run from the checkout's root after
# main.sh; the two repetitions kept here are this script run twice, one after the other.
C=${OUT_ROOT:-outputs/judge_cost}; mkdir -p "$C"
PL="${PYTHON:-python3} -m scripts.lab.policy_learns --reuse outputs/main --steps 20 --test-freq 20 --parallel 1 --kv-cache-gb 2"
( $PL --out "$C/rule" --arms rule > "$C/rule.log" 2>&1; echo "rule EXIT=$?" >> "$C/exits.txt" ) &
( $PL --out "$C/colocated" --arms judge --judge-placement colocated > "$C/colocated.log" 2>&1
  echo "colocated EXIT=$?" >> "$C/exits.txt" ) &
( $PL --out "$C/colocated_deferred" --arms judge --judge-placement colocated verl_judge.deferred_reward=true \
    > "$C/colocated_deferred.log" 2>&1; echo "colocated_deferred EXIT=$?" >> "$C/exits.txt" ) &
wait; echo "cost EXIT=done" >> "$C/exits.txt"
