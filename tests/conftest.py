"""Shared fixtures: tiny random models, the bundled model, the shared data folder.

Tests that need the real data or the bundled model skip when they are missing, except
under CI (``CI=true``), where a missing prerequisite is a failure.
"""

from __future__ import annotations

import os

import pytest

from prereq import skip_or_fail

# Both conftest modules are named "conftest"; as doctest modules they would clash.
collect_ignore = ["conftest.py", "browser/conftest.py"]


def pytest_configure(config):
    """The numerics rerun (``make test-numerics-portable``) varies what a CPU may vary: torch's
    thread count (``ATTNKIT_TEST_THREADS``: reductions split differently) and its float32
    matmul precision (``ATTNKIT_TEST_MATMUL_PRECISION``), beside the kernels
    (``ATEN_CPU_CAPABILITY``), so a comparison tighter than tests/tolerances.py allows fails
    here, not on another machine."""
    threads = os.environ.get("ATTNKIT_TEST_THREADS")
    precision = os.environ.get("ATTNKIT_TEST_MATMUL_PRECISION")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and not threads:
        # pytest-xdist workers share the cores: OpenMP threads beyond a worker's share spin
        # against each other (and against the kernels and servers the browser tests start,
        # which inherit OMP_NUM_THREADS).
        threads = str(max(1, (os.cpu_count() or 1) // workers))
        os.environ.setdefault("OMP_NUM_THREADS", threads)
    if threads or precision:
        import torch

        if threads:
            torch.set_num_threads(int(threads))
        if precision:
            torch.set_float32_matmul_precision(precision)


@pytest.fixture(scope="session")
def data_dir():
    from attnkit.data import data_dir as find

    d = find()
    if d is None or not d.is_dir():
        skip_or_fail("real data missing: set ATTNKIT_DATA or put ../shared/data beside the checkout")
    return d


@pytest.fixture(scope="session")
def ewt_dir(data_dir):
    d = data_dir / "ud-english-ewt"
    if not d.is_dir():
        skip_or_fail(f"UD English EWT missing at {d}")
    return d


@pytest.fixture(scope="session")
def gum_path(data_dir):
    p = data_dir / "ud-english-gum" / "en_gum-ud-dev.conllu"
    if not p.exists():
        skip_or_fail(f"UD English GUM dev missing at {p}")
    return p


@pytest.fixture(scope="session")
def minilm():
    import attnkit
    from attnkit.errors import ModelNotFoundError

    try:
        return attnkit.load("minilm")
    except ModelNotFoundError as exc:
        skip_or_fail(str(exc))


@pytest.fixture(scope="session")
def tiny_bert():
    from attnkit.testing import tiny_model

    return tiny_model("bert")


@pytest.fixture(scope="session")
def tiny_roberta():
    from attnkit.testing import tiny_model

    return tiny_model("roberta")


@pytest.fixture(scope="session")
def tiny_gpt2():
    from attnkit.testing import tiny_model

    return tiny_model("gpt2")


@pytest.fixture()
def band_workers(monkeypatch):
    """Every pass of :func:`attnkit.core.blocks.summarize` read in two worker threads (whatever
    its size and the machine's cores), the caller on two torch threads; yields the names of
    the threads that computed blocks of a LazyAttention."""
    import threading

    import torch

    from attnkit.core import blocks
    from attnkit.runtime.lazy import LazyAttention

    monkeypatch.setattr(blocks, "PARALLEL_CELLS", 0)
    monkeypatch.setattr(blocks, "_cores", lambda: 2)
    seen: set[str] = set()
    block = LazyAttention.block

    def watched(self, *args, **kwargs):
        seen.add(threading.current_thread().name)
        return block(self, *args, **kwargs)

    monkeypatch.setattr(LazyAttention, "block", watched)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield seen
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def dask_cluster():
    """``with dask_cluster(processes=True) as client:``: a Dask client of a new two-worker
    ``LocalCluster`` (one thread a worker, no dashboard, its logs silenced). ``processes=True``:
    worker processes (they see only what they are sent or can open themselves);
    ``processes=False``: worker threads in this process (they share its files and memory).
    The client and then the cluster are closed when the ``with`` block ends, also when a test
    fails inside it. ``config``: Dask settings set while the cluster starts (e.g.
    ``{"distributed.scheduler.allowed-failures": 0}``). Session-scoped, so a module-scoped fixture may keep one cluster for its
    tests; the cluster itself lives only as long as its ``with`` block. Skips without
    ``distributed``."""
    import contextlib
    import logging

    distributed = pytest.importorskip("distributed")
    import dask

    @contextlib.contextmanager
    def start(*, processes: bool, config: dict | None = None):
        with contextlib.ExitStack() as stack:
            with dask.config.set(config or {}):  # the scheduler reads it when it starts
                cluster = stack.enter_context(distributed.LocalCluster(
                    n_workers=2, threads_per_worker=1, processes=processes,
                    dashboard_address=None, silence_logs=logging.CRITICAL))
            yield stack.enter_context(distributed.Client(cluster, set_as_default=False))

    return start
