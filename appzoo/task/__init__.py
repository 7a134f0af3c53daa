"""The contract of a task: the model and reader bases, how a task declares its serving shape and its floor, and its post-hoc decision rules."""
