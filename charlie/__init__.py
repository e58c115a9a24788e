"""Charlie: a local-first personal assistant whose memory is an interface."""

__version__ = "0.1.0"
