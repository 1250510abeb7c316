"""The web tests' fixtures (users, logins, the launch-test functions), shared with these."""
from tests.web.launch_helpers import fast_hashing, fresh_throttles, logged_in, other_user, test_functions, user  # noqa: F401
