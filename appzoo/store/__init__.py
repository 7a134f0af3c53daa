"""What a run leaves on disk: the run folder and its files, a trained model (best/), the resolved config."""
