"""Inference from noisy query answers and the utility-driven query engine (paper 000).

``History`` holds Laplace-noised (paper 000) or Gaussian-noised answers to linear queries
over a count cube; ``History.posterior(q)`` gives the BLUE of a new query q, the exact
distribution of its error and credible intervals. ``QueryEngine`` answers queries with a
required accuracy, from the history when it can, else with the smallest fresh privacy
spend, in Laplace or Gaussian noise (``noise="auto"``: whichever the accountant's
composition prices lower).
"""

from dpbayes.answers.blue import BLUE, History, NotEstimable, query_sensitivity
from dpbayes.answers.credible import SUPPORTS, Posterior
from dpbayes.answers.cube import Axis, Bins, Cube
from dpbayes.answers.engine import Answer, QueryEngine
from dpbayes.answers.error_distribution import METHODS, LaplaceSum
from dpbayes.answers.queries import Query, make_query, predicate_mask
from dpbayes.answers.store import AnswerRecord, HistoryStore, JsonlStore, MemoryStore

__all__ = [
    "BLUE",
    "METHODS",
    "SUPPORTS",
    "Answer",
    "AnswerRecord",
    "Axis",
    "Bins",
    "Cube",
    "History",
    "HistoryStore",
    "JsonlStore",
    "LaplaceSum",
    "MemoryStore",
    "NotEstimable",
    "Posterior",
    "Query",
    "QueryEngine",
    "make_query",
    "predicate_mask",
    "query_sensitivity",
]
