"""The web tests' fixtures (users, logins, the launch-test functions), shared with these."""
from tests.web.launch_helpers import (fast_hashing, fresh_throttles, local_user, logged_in, other_user,  # noqa: F401
                                      test_functions, user)
