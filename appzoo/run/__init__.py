"""One run: plan -> prepare -> the modes (train, eval, predict, export); the trainer and its callbacks."""
