"""syncd: sync, back up and migrate organizations of the Documentation Management API."""

__version__ = "0.1.0"
