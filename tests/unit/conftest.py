import pytest

from runtime import add_pre_invocation_hook, remove_pre_invocation_hook


@pytest.fixture
def install_hook():
    """Install pre-invocation hooks for one test: `install_hook(fn)`; all are removed afterwards."""
    installed = []

    def install(hook):
        add_pre_invocation_hook(hook)
        installed.append(hook)
        return hook

    yield install
    for hook in installed:
        remove_pre_invocation_hook(hook)
