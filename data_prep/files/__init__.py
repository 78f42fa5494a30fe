"""Files in and out, shared by data_prep and by the evaluators, reports and benchmarks of ``scripts/``: ``readers``
(JSONL, JSON, parquet and hub datasets, row by row, naming bad rows), ``outputs`` (atomic writes: every file of one
run appears together or not at all) and ``errors`` (``DataError``, ``BadRow``, ``SkipRow``). No command of their own.
"""
