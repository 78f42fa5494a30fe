"""Benchmarks: ``python -m scripts.bench.rewards`` (rule-reward throughput per core) and
``python -m scripts.bench.judge_reward`` (the LLM-judge reward against a server of known capacity)."""
