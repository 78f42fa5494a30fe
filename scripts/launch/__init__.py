"""The launch layer: what runs before and around a training run, in the process that starts it.

    python -m scripts.launch <recipe> [overrides]     # plan, check and run one recipe (launcher.py)

``launcher`` (plan, check, run one recipe), ``knobs`` (the environment variables), ``overrides``, ``defaults``
(default model and data), ``verl_config`` (the config check) with ``config_compose``, ``config_checks`` and
``config_paths`` (composing the config, its checks, its files), ``ray_head`` and ``ray_job`` (a private Ray head, or a
job on a cluster), ``judge_server`` (the judge served beside a run), ``local_run`` (a local run and its retries, the
services a config enables), ``stall`` (the watchdog), ``services`` (starting, waiting for and stopping background
processes; the child processes to stop on every exit path).
"""
