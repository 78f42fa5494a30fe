"""Evaluators: ``python -m scripts.eval.judge`` (a judge on pointwise / pairwise data) and
``python -m scripts.eval.gsm8k`` (policy accuracy on GSM8K, optionally graded by a judge). What they
share, one concern a module: ``rows`` (reading the data), ``backends`` (endpoint / vLLM / transformers
generation), ``predictions`` (resume log, stop signals, ``--out``), ``figures`` (their PNGs) and ``cli``
(``InputError``, exit status); Markdown tables come from ``scripts.report.render``, atomic writes from
``data_prep.files.outputs``."""
