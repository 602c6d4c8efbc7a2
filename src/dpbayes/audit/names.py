"""Names of the built-in models the auditor audits (no numeric imports: the CLI's parser)."""

MODEL_NAMES = ("beta-bernoulli", "dirichlet-categorical", "normal-mean")
