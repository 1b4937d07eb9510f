"""Attention of many inputs: extraction into memory or a resumable Zarr store.
"""
