"""End-to-end runs: a model and a data set in, tables (CSV) and figures out.

Each module wires extraction (:func:`attnkit.extract`) to one analysis and its figures, so
that ``attnkit analyze`` and the scripts in ``benchmarks/`` regenerate published numbers
with one call.
"""

from .coref import run_coref
from .general import run_general, write_general

__all__ = ["run_coref", "run_general", "write_general"]
