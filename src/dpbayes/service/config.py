"""What the service answers queries about: the data, the cube's attributes, the budget."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpbayes.answers import Bins, Cube
from dpbayes.privacy.validation import check_delta, check_epsilon

__all__ = ["DEFAULT_ATTRIBUTES", "EngineConfig"]

BUNDLED = "bundled:randhie"

# The bundled RAND HIE extract: nominal attributes and visits to an MD in fixed bins
# (domains written down here, never read from the data).
DEFAULT_ATTRIBUTES: dict[str, dict[str, Any]] = {
    "health": {"categories": ["excellent", "good", "fair", "poor"]},
    "idp": {"categories": [0, 1]},
    "year": {"categories": [1, 2, 3, 4, 5]},
    "mdvis": {"bins": [0, 1, 3, 6, 11, math.inf]},
}


@dataclass(frozen=True)
class EngineConfig:
    """The service's query engine: data source, attribute domains and total budget.

    ``data``: a CSV/Parquet path, or ``"bundled:randhie"``. ``attributes`` maps a column to
    ``{"categories": [...]}`` or ``{"bins": [e0, e1, ...]}``. ``epsilon``/``delta`` is the
    total budget used when the database is created (afterwards the stored budget rules).
    ``seed`` selects seeded simulation noise (tests only); ``None`` is secure noise.
    """

    data: str = BUNDLED
    attributes: dict[str, dict[str, Any]] = field(default_factory=lambda: dict(DEFAULT_ATTRIBUTES))
    epsilon: float = 1.0
    delta: float = 0.0
    seed: int | None = None
    max_epsilon: float | None = None
    method: str = "auto"

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon, "epsilon")
        check_delta(self.delta, "delta")
        if not isinstance(self.attributes, dict) or not self.attributes:
            raise ValueError("attributes must map at least one column to its domain")
        for name, dom in self.attributes.items():
            if not isinstance(dom, dict) or set(dom) not in ({"categories"}, {"bins"}):
                raise ValueError(
                    f"attributes[{name!r}] must be {{'categories': [...]}} or {{'bins': [...]}}"
                )
        if self.data != BUNDLED and not Path(self.data).is_file():
            raise ValueError(f"data: no such file {self.data!r}")

    def spec(self) -> dict[str, Any]:
        """The cube definition stored in the database (JSON-friendly)."""
        data = self.data if self.data == BUNDLED else str(Path(self.data).resolve())
        attrs = {
            k: {kk: [_json_num(v) for v in vv] for kk, vv in d.items()}
            for k, d in self.attributes.items()
        }
        return {"data": data, "attributes": attrs}

    def build_cube(self) -> Cube:
        """Count the data over the attributes' cells (non-private; stays in the server)."""
        attrs: dict[str, Any] = {}
        for name, dom in self.attributes.items():
            attrs[name] = Bins(dom["bins"]) if "bins" in dom else list(dom["categories"])
        if self.data == BUNDLED:
            from dpbayes.data import load_bundled

            return Cube.from_table(load_bundled("randhie"), attrs)
        return Cube.from_table(self.data, attrs)


def _json_num(v: Any) -> Any:
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def counts_digest(cube: Cube) -> str:
    """SHA-256 of the counts: a restart on other data is refused (the history would lie)."""
    body = json.dumps([cube.shape, cube.cell_vector().tolist()]).encode()
    return hashlib.sha256(body).hexdigest()
