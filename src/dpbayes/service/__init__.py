"""The online query-answering service (paper 000 §5): HTTP API, database ledger, web page.

``create_app(engine_config, db_url, admin_key)`` builds the FastAPI app; ``dpbayes serve``
runs it with uvicorn. See docs/service.md.
"""

from dpbayes.service.config import DEFAULT_ATTRIBUTES, EngineConfig

__all__ = ["DEFAULT_ATTRIBUTES", "EngineConfig", "create_app"]


def __getattr__(name: str) -> object:
    if name == "create_app":  # fastapi is an optional dependency (the `service` extra)
        from dpbayes.service.app import create_app

        return create_app
    raise AttributeError(name)
