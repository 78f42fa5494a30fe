"""The trainer: what runs inside the training job (a Ray job's driver, or a local run's).

    python -m scripts.train --config-path "$PWD/recipes/<recipe>" --config-name config [overrides]

``trainer`` (verl's PPO trainer with the hooks), ``seam`` (where the hooks meet verl: the table of what is
replaced, the trainer subclass), ``hooks`` (judge-aware step metrics, pair-grouped GRPO, abstained
samples out of their groups), ``watches`` (fail-fast on a silent judge, the hacking watch), ``fast_logprobs``
(chunked log-probabilities without flash-attn, verl's ``external_lib``).
"""
