import os
import warnings

import pytest

# Keep the suite's torch runs small and deterministic in thread count.
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(autouse=True)
def _no_torch_deprecation_noise():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\..*")
        yield
