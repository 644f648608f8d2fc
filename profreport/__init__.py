"""profreport: what kernel fusion really did, per PyTorch execution mode."""

__version__ = "0.1.0"
