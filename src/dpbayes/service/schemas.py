"""The service's request and response bodies: what its OpenAPI document promises.

Every body the API sends is one of these models (FastAPI checks the 2xx bodies against
them; the error bodies are built here too), and every status an operation can return is
listed with its body in :func:`responses`, so the document at ``/openapi.json`` matches
what the service does (``tests/service/test_openapi_fuzz.py`` fuzzes it).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AnalystIn",
    "AnalystOut",
    "AnswerOut",
    "BudgetIn",
    "BudgetOut",
    "ErrorOut",
    "HistoryOut",
    "QueryIn",
    "QuoteIn",
    "QuoteOut",
    "RefusalOut",
    "SchemaOut",
    "responses",
]

_WHERE = (
    'predicate over the attributes, e.g. "health = poor and idp = 1" '
    "(empty: all records in the domain)"
)
_COEFFICIENTS = "one coefficient per cell of the cube (C order over the attributes)"


def _one_of_where_coefficients(schema: dict[str, Any]) -> None:
    """The document says what the validator checks: exactly one of the two, never null."""
    props = schema["properties"]
    props["where"] = {"type": "string", "maxLength": 2000, "description": _WHERE}
    props["coefficients"] = {
        "type": "array",
        "items": {"type": "number"},
        "minItems": 1,
        "maxItems": 100_000,
        "description": _COEFFICIENTS,
    }
    schema["oneOf"] = [{"required": ["where"]}, {"required": ["coefficients"]}]
    schema["examples"] = [
        {"where": "health = poor and idp = 1", "half_width": 20, "confidence": 0.95}
    ]


class QuoteIn(BaseModel):
    """A query and its requirement: the answer within +-half_width with prob. >= confidence.

    Give exactly one of ``where`` (a predicate) or ``coefficients`` (a linear query).
    """

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        strict=True,
        json_schema_extra=lambda s, _cls: _one_of_where_coefficients(s),
    )
    where: str | None = Field(None, max_length=2000, description=_WHERE)
    coefficients: list[float] | None = Field(None, max_length=100_000, description=_COEFFICIENTS)
    half_width: float = Field(gt=0, le=1e9, description="required half-width d of the interval")
    confidence: float = Field(
        ge=0.5, le=0.999999, description="required probability p that the truth is within +-d"
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> QuoteIn:
        if (self.where is None) == (self.coefficients is None):
            raise ValueError("give exactly one of 'where' (a predicate) or 'coefficients'")
        return self


class QueryIn(QuoteIn):
    """A query to answer (see QuoteIn); ``density`` adds the posterior density."""

    model_config = ConfigDict(
        json_schema_extra=lambda s, _cls: _one_of_where_coefficients(s),
        json_schema_mode_override="validation",
    )
    density: bool = Field(False, description="include the posterior density for plotting")


class AnalystIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.@-]+$")


class BudgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    epsilon: float = Field(gt=0, le=1e6, description="the total eps (never below what is spent)")
    delta: float = Field(0.0, ge=0, lt=1, description="the total delta")


# ---------------------------------------------------------------------------- responses
class ErrorOut(BaseModel):
    """An error: one line that says what is wrong (and names the field when one is)."""

    detail: str = Field(examples=["half_width: Input should be greater than 0"])


class RefusalOut(BaseModel):
    """A well-formed query the service refuses (e.g. the budget cannot pay for it)."""

    detail: str = Field(description="why, and that nothing was spent")
    status: Literal["refused"]
    epsilon_spent: float = Field(description="always 0: a refusal spends nothing")
    remaining_epsilon: float


class Density(BaseModel):
    x: list[float] = Field(description="points (answer values)")
    pdf: list[float] = Field(description="the posterior density of the true answer at x")


class AnswerOut(BaseModel):
    """A noisy answer: a fresh release, or inferred for free from the history."""

    query: str = Field(description="the query as the service read it")
    status: Literal["fresh", "history"]
    free_from_history: bool = Field(description="true: no budget spent (status history)")
    estimate: float = Field(description="the answer (posterior mean of the true answer)")
    interval: list[float] = Field(
        min_length=2,
        max_length=2,
        description="the credible interval at confidence_required: estimate +- its "
        "half-width at that level (at most half_width: the requirement is met; narrower "
        "when the answer is more precise than asked)",
    )
    half_width: float
    confidence_required: float
    confidence_reached: float = Field(
        description="P(|true answer - estimate| <= half_width) under the posterior (a lower "
        "bound on it when the error distribution was computed conservatively)"
    )
    epsilon_spent: float = Field(description="eps this answer spent (0 when free)")
    noise: Literal["laplace", "gaussian"] | None = Field(
        None, description="the noise of a fresh answer (null when free)"
    )
    remaining_epsilon: float
    reason: str
    guarantee: str | None = Field(description="the guarantee of what was released")
    density: Density | None = Field(None, description="only when the query asked for it")


class QuoteOut(BaseModel):
    """What a query would cost now; nothing is spent, no noise is drawn."""

    query: str
    status: Literal["free", "fresh", "refused"] = Field(
        description="free: the history meets the requirement; fresh: one new answer at "
        "epsilon; refused: the service would refuse the query now"
    )
    epsilon: float | None = Field(
        description="eps the query would spend now (0 when free, null when refused)"
    )
    remaining_epsilon: float
    spent_after_epsilon: float | None = Field(
        description="the budget spent (eps, under the service's composition) after this "
        "query; null when refused"
    )
    reason: str


class Attribute(BaseModel):
    name: str
    kind: Literal["bins", "categories"]
    values: list[str | int | float] = Field(description="the attribute's values (bins' labels)")
    edges: list[float | str] | None = Field(
        None, description="bins only: the edges (infinite ones as strings)"
    )


class PrivacyUnit(BaseModel):
    unit: Literal["record", "user"]
    neighbouring_relation: str
    user_column: str | None = None
    max_rows_per_user: int | None = None


class SchemaOut(BaseModel):
    attributes: list[Attribute]
    n_cells: int
    privacy_unit: PrivacyUnit


class HistoryRow(BaseModel):
    id: int
    query: str
    noisy_answer: float
    epsilon: float
    analyst: str
    created: float = Field(description="seconds since 1970-01-01 UTC")


class HistoryOut(BaseModel):
    answers: list[HistoryRow]


class EpsDelta(BaseModel):
    epsilon: float
    delta: float


class BudgetOut(BaseModel):
    total: EpsDelta
    spent: EpsDelta
    remaining: EpsDelta
    answers: int = Field(description="number of released answers")
    composition: str = Field(description="how answers' spends add up, in words")
    accounting: str = Field(description="the composition: basic, pld or rdp")


class AnalystOut(BaseModel):
    name: str
    api_key: str = Field(description="shown once; the service stores only a salted hash")


_WHY = {
    400: "malformed JSON, or a query the cube cannot read (unknown attribute or value, "
    "wrong number of coefficients)",
    401: "missing or invalid key",
    409: "refused",
    413: "request body larger than 64 KiB",
    422: "a field is missing, of the wrong type or out of range",
    503: "the query took longer than the time limit, or the ledger kept changing; nothing "
    "was spent: retry (Retry-After)",
}


def responses(
    *codes: int,
    bodies: dict[int, type[BaseModel]] | None = None,
    why: dict[int, str] | None = None,
) -> dict[int | str, dict[str, Any]]:
    """The documented error statuses of an operation, each with its body model (ErrorOut
    unless ``bodies`` says otherwise) and description (``why`` overrides the default)."""
    out: dict[int | str, dict[str, Any]] = {}
    for c in codes:
        out[c] = {
            "description": (why or {}).get(c, _WHY[c]),
            "model": (bodies or {}).get(c, ErrorOut),
        }
        if c == 401:
            out[c]["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
        if c == 503:
            out[c]["headers"] = {"Retry-After": {"schema": {"type": "string"}}}
    return out
