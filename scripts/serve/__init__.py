"""An OpenAI-compatible judge server on the CPU: ``python -m scripts.serve.cpu_judge`` (a real model through
transformers; ``bash scripts/serve/cpu_judge.sh vllm|hf`` also sets up vLLM's CPU build). The scripted fake server
used by the tests and benchmarks is a test double: ``python -m tests.doubles.fake_openai``."""
