"""Reports of runs and evaluations: ``python -m scripts.report.plot_metrics`` (training curves),
``python -m scripts.report.summarize_run`` (median stage times, rewards) and
``python -m scripts.report.compare_evals`` (before / after of two evaluation reports)."""
