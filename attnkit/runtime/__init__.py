"""Running models: loading, capture through the attention interface, lazy maps, measures.

One record per architecture family (:mod:`attnkit.runtime.archs`) holds every fact the
runtime needs about a family.
"""
