"""Accounts: the login page and API tokens, and the throttle in front of every password check."""
