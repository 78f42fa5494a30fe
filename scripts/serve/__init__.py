"""OpenAI-compatible servers: ``python -m scripts.serve.cpu_judge`` (a real model on the CPU through
transformers; ``bash scripts/serve/cpu_judge.sh vllm|hf`` also sets up vLLM's CPU build) and
``python -m scripts.serve.fake_openai`` (scripted replies and injected faults, for tests, benchmarks
and the README figures)."""
