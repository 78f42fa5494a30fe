"""Evaluators: ``python -m scripts.eval.judge`` (a judge on pointwise / pairwise data) and
``python -m scripts.eval.gsm8k`` (policy accuracy on GSM8K, optionally graded by a judge). What they
share, one concern a module: ``rows`` (reading the data), ``backends`` (which backend answers: ``endpoint``, an
OpenAI-compatible server, or ``offline``, vLLM / transformers on this machine), ``predictions`` (resume log, stop
signals, ``--out``), ``figures`` (their PNGs) and ``cli`` (``InputError``, exit status); the GSM8K evaluator's own
parts are ``gsm8k_data`` (its questions), ``gsm8k_grading`` (one answer's scores) and ``gsm8k_report`` (metrics,
``report.md``). Markdown tables come from ``scripts.report.render``, atomic writes from ``data_prep.files.outputs``."""
