"""Benchmarks: ``python -m scripts.lab.bench.judge_cost`` (what a judge adds to a GRPO step, stage by stage, against the
rule: rule, resident, colocated, server and route side by side), ``python -m scripts.lab.bench.abstain`` (a judge outage
replayed on rollout dumps), ``python -m scripts.lab.bench.rewards`` (rule-reward throughput per core),
``python -m scripts.lab.bench.judge_reward`` (the LLM-judge reward against a server of known capacity) and
``python -m scripts.lab.bench.random_model`` (random-weight SmolLM2-360M / 1.7B models for the judge-cost
benchmark at anchor shapes, ``scripts/lab/bench/shapes.sh``) and ``python -m scripts.lab.bench.ray_cluster`` (a recipe
submitted to a Ray cluster of one or two nodes started on this host, docs/ray_cluster.md)."""
