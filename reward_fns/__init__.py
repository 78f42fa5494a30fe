"""verl-judge reward functions (verl ``compute_score`` signature).

Each module exposes ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)``
returning a dict with the same keys for every sample, ``score`` first. Parsing lives in
``reward_fns.parse`` and is shared with the evaluators.
"""
