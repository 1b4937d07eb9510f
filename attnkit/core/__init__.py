"""The core: attention of one input, per-head results, the one reader and validator.

Imports nothing of attnkit but the shared root modules (errors, ``_compat``, ``_progress``).
"""
