"""Evaluators: ``python -m scripts.eval.judge`` (a judge on pointwise / pairwise data) and
``python -m scripts.eval.gsm8k`` (policy accuracy on GSM8K, optionally graded by a judge); shared
helpers in ``scripts.eval.common``."""
