"""check_rng names its argument for a negative seed (numpy: "expected non-negative integer")."""

from __future__ import annotations

import numpy as np
import pytest

from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_rng


@pytest.mark.parametrize("seed", [-1, np.int64(-5), -(2**70)])
def test_negative_seed_is_refused_naming_rng(seed):
    with pytest.raises(ValueError, match=r"^rng \(seed\) must be >= 0"):
        check_rng(seed)
    with pytest.raises(ValueError, match=r"^rng \(seed\) must be >= 0"):
        noise_source(seed)


def test_non_negative_seeds_still_work():
    assert isinstance(check_rng(0), np.random.Generator)
    assert isinstance(check_rng(np.uint64(2**63)), np.random.Generator)
