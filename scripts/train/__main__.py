"""``python -m scripts.train``: the trainer (scripts/train/trainer.py); the launcher and Ray jobs run this."""

from scripts.train.trainer import main

main()
