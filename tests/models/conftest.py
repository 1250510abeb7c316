"""One real model server (llama_server.py) for the tests here: started before the first, waited for, and
ended by its PID after the last; skipped, saying how to install it, when it is not installed."""
import pytest

from ..unit.conftest import install_hook  # noqa: F401 (a fixture: hooks installed for one test)
from .llama_server import HOW_TO_ENABLE, ModelServer, model_path, provider_on


@pytest.fixture(scope="session")
def model_server(tmp_path_factory):
    model = model_path()
    if model is None:
        pytest.skip(HOW_TO_ENABLE)
    server = ModelServer(model, tmp_path_factory.mktemp("model-server") / "server.log")
    try:
        server.wait_until_serving()
        yield server
    finally:
        server.stop()


@pytest.fixture
def model(model_server, monkeypatch):
    """The project's OpenAI provider on the real server (`provider_on`), counting its calls."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return provider_on(model_server)
