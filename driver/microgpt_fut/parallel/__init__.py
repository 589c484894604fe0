"""Data parallelism: the host-state model of --threads and MPI ranks, the gradient exchange, the MPI world and its watchdog."""
