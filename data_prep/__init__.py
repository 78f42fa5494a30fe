"""Data preparation: public data -> verl RLHFDataset parquet for every verl-judge recipe.

Entry points (each with ``--help``): ``python -m data_prep.gsm8k``, ``data_prep.pointwise``,
``data_prep.pairwise``, ``data_prep.gsm8k_verify``, ``data_prep.overlap``. Shared machinery: reading
(``data_prep.files.readers``), the length gate and truncation (``lengths``), rows (``rows``), atomic and
deterministic writes (``outputs``), summaries (``summary``). See ``data_prep/README.md`` for
commands, the row schema and file names.
"""
