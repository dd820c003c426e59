"""The client's version, in one place (pyproject.toml reads it too)."""

VERSION = "0.2.0"
"""The leasekeeper release the client comes with."""
