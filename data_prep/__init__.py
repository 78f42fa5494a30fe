"""Data preparation: public data -> verl RLHFDataset parquet for every verl-judge recipe.

Entry points (each with ``--help``): ``python -m data_prep.gsm8k``, ``data_prep.pointwise``,
``data_prep.pairwise``, ``data_prep.gsm8k_verify``, ``data_prep.overlap``, ``data_prep.judge_sft``,
``data_prep.policy_sft``, ``data_prep.word_problems``, ``data_prep.model``. Shared machinery: the command line and
the per-split loop (``cli``), reading (``data_prep.files.readers``), the length gate and truncation (``lengths``),
rows (``rows``), atomic and deterministic writes (``outputs``), summaries (``summary``). See ``data_prep/README.md``
for commands, the row schema and file names.
"""
