"""The test database as a DATABASE_URL, for a child process (a live server, a CLI run) that must share it."""
from pathlib import Path


def database_url(settings_dict) -> str:
    engine = settings_dict["ENGINE"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{Path(settings_dict['NAME']).resolve()}"
    if engine.endswith("postgresql"):
        auth = settings_dict.get("USER") or ""
        if settings_dict.get("PASSWORD"):
            auth += f":{settings_dict['PASSWORD']}"
        host = f"{settings_dict.get('HOST') or '127.0.0.1'}:{settings_dict.get('PORT') or 5432}"
        return f"postgres://{auth + '@' if auth else ''}{host}/{settings_dict['NAME']}"
    raise RuntimeError(f"child processes can share SQLite and PostgreSQL test databases, not {engine}")
