#!/usr/bin/env bash
# gsm8k_rule: recipes/gsm8k_rule/config.yaml through the shared launcher (see README.md). Arguments are Hydra overrides.
exec bash "$(dirname "$0")/../../scripts/launch.sh" gsm8k_rule "$@"
