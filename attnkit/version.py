"""attnkit's version, in one place (the package, reports and stores record it)."""

__version__ = "0.1.0"
