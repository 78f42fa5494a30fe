"""The trainer: what runs inside the training job (a Ray job's driver, or a local run's).

    python -m scripts.train --config-path "$PWD/recipes/<recipe>" --config-name config [overrides]

``trainer`` (verl's PPO trainer with the hooks), ``hooks`` (judge-aware step metrics, fail-fast, hacking watch,
pair-grouped GRPO), ``fast_logprobs`` (chunked log-probabilities without flash-attn, verl's ``external_lib``).
"""
