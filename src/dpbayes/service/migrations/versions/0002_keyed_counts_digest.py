"""The cube's digest of the counts becomes keyed: HMAC-SHA256, key kept outside the database.

Revision 0001 stored an unkeyed SHA-256 of the exact counts: whoever could read the
database could confirm a guess of the counts. This revision checks that digest against
the data once (the service passes ``rekey_cube`` in the Alembic config's attributes: it
raises if the data changed, so the upgrade is refused exactly as a restart on other data
is), stores the keyed digest and the key's id instead, overwrites the old value and drops
its column. (PostgreSQL keeps dead row versions until VACUUM runs; SQLite zeroes freed
pages, secure_delete, and the WAL is emptied after the upgrade.)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import context, op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("cube", sa.Column("counts_hmac", sa.String(64), nullable=True))
    op.add_column("cube", sa.Column("hmac_key_id", sa.String(16), nullable=True))
    con = op.get_bind()
    for row in con.execute(sa.text("SELECT id, counts_sha256 FROM cube")).all():
        rekey = context.config.attributes.get("rekey_cube")
        if rekey is None:
            raise RuntimeError(
                "revision 0002 re-keys the cube's digest and needs the service's key: start "
                "`dpbayes serve` on this database to upgrade it"
            )
        mac, key_id = rekey(row.counts_sha256)
        con.execute(
            sa.text(
                "UPDATE cube SET counts_hmac = :mac, hmac_key_id = :kid, "
                "counts_sha256 = :blank WHERE id = :id"
            ),
            {"mac": mac, "kid": key_id, "blank": "0" * 64, "id": row.id},
        )
    with op.batch_alter_table("cube") as batch:
        batch.drop_column("counts_sha256")
        batch.alter_column("counts_hmac", existing_type=sa.String(64), nullable=False)
        batch.alter_column("hmac_key_id", existing_type=sa.String(16), nullable=False)


def downgrade() -> None:
    raise NotImplementedError(
        "revision 0002 cannot be undone: the unkeyed digest of the counts is gone for good"
    )
