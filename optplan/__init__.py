"""optplan: optimization-based planning for Volcano-scheduled AI clusters."""

__version__ = "0.1.0"
