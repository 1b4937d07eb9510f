"""Attention measures beyond raw weights."""
