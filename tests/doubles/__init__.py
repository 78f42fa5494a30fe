"""Test doubles: the fake OpenAI-compatible server (``fake_openai``), its scripted replies (``fake_replies``) and
injected faults (``fake_faults``). Run from the checkout: ``python -m tests.doubles.fake_openai --help``."""
