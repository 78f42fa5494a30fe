#!/usr/bin/env bash
# gsm8k_local_judge: recipes/gsm8k_local_judge/config.yaml through the shared launcher (see README.md). Arguments are Hydra overrides.
exec bash "$(dirname "$0")/../../scripts/launch.sh" gsm8k_local_judge "$@"
