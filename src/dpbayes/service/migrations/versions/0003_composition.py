"""Tight accounting: the budget records how spends compose, each answer what composing it
needs.

``budget.composition`` (``basic``, ``pld`` or ``rdp``; existing databases keep ``basic``,
the only composition they were run under), ``answers.delta`` (0 for every answer released
before: all were Laplace answers, pure eps-DP) and ``answers.gaussian_ratio`` (sigma /
Delta_2 of a Gaussian answer; NULL otherwise). A restart recomputes the spent budget from
these rows, in their order, by the recorded composition.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("budget") as batch:
        batch.add_column(
            sa.Column("composition", sa.String(16), nullable=False, server_default="basic")
        )
    with op.batch_alter_table("answers") as batch:
        batch.add_column(sa.Column("delta", sa.Float, nullable=False, server_default="0"))
        batch.add_column(sa.Column("gaussian_ratio", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("answers") as batch:
        batch.drop_column("gaussian_ratio")
        batch.drop_column("delta")
    with op.batch_alter_table("budget") as batch:
        batch.drop_column("composition")
