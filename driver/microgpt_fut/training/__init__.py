"""One training run over any family and dataset (run, family, loop), its settings (lines, stream), resume rules, checkpoints, curves, memory checks and evaluations."""
