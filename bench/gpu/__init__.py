"""The GPU run (issue 17): prepared here, run on a lent GPU machine in one command.

A GPU machine (one H200, no network, about 15 minutes at a time, one command of at
most 10 minutes) is lent only now and then, so everything is prepared and rehearsed
on a CPU machine and only ``bench/gpu/run`` runs there:

- ``bench/gpu/prepare`` (here): the CUDA C of both libraries, wheels of what the GPU
  image lacks, and the data, in ``bench/gpu/payload`` (``payload``).
- ``bench/gpu/run`` (there; ``--dry-run`` here): installs the wheels, builds the
  cuda modules (``build``), times the first training step with a cold and a cached
  kernel cache, runs the cuda tests, then measures our kernels against PyTorch
  CUDA eager and ``torch.compile`` (``worker``, one process per lane, GPU work
  serialised by a lock) within per-phase time budgets (``runner``), and writes
  CSV, PNG, a summary and a log to ``$OUT`` (``report``).

Configurations: ``configs``. bench/README.md, "GPU run", has the device tool call.
"""
