"""Matplotlib figures for every view (papers, PDF, GitHub rendering).

One submodule per family of figures; the public functions are re-exported here.
"""
