#!/usr/bin/env bash
# judge_pointwise: recipes/judge_pointwise/config.yaml through the shared launcher (see README.md). Arguments are Hydra overrides.
exec bash "$(dirname "$0")/../../scripts/launch.sh" judge_pointwise "$@"
