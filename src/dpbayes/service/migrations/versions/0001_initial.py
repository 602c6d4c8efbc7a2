"""The first schema: cube, budget, answers (history + ledger), analysts.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cube",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("counts_sha256", sa.String(64), nullable=False),
        sa.Column("n_cells", sa.Integer, nullable=False),
    )
    op.create_table(
        "budget",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("total_epsilon", sa.Float, nullable=False),
        sa.Column("total_delta", sa.Float, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
    )
    op.create_table(
        "answers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("epsilon", sa.Float, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("analyst", sa.String(100), nullable=False),
        sa.Column("query", sa.Text, nullable=False),
        sa.Column("noisy_answer", sa.Float, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_table(
        "analysts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("key_id", sa.String(32), nullable=False, unique=True),
        sa.Column("salt", sa.String(64), nullable=False),
        sa.Column("key_sha256", sa.String(64), nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for name in ("analysts", "answers", "budget", "cube"):
        op.drop_table(name)
