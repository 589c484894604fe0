"""The compiled kernels as Python sees them: loading a backend's library (runtime), the Futhark context (context) and the GPU kernels kept between processes (kernel_cache)."""
