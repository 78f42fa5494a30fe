#!/usr/bin/env bash
# judge_pairwise: recipes/judge_pairwise/config.yaml through the shared launcher (see README.md). Arguments are Hydra overrides.
exec bash "$(dirname "$0")/../../scripts/launch.sh" judge_pairwise "$@"
