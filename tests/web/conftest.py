"""Fixtures for the web tests (users, logins, the launch-test functions); see launch_helpers.py."""
from .launch_helpers import (api, fast_hashing, fresh_throttles, local_user, logged_in, offline_models,  # noqa: F401
                             other_user, test_functions, user)
