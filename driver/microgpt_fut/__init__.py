"""microgpt-fut: Karpathy's microgpt with Futhark kernels, driven from Python."""

__version__ = "0.1.0"
