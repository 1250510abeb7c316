"""An executor module that refuses to load, as one missing its own configuration would (test_checks)."""
from django.core.exceptions import ImproperlyConfigured

raise ImproperlyConfigured("this executor needs QUEUE_URL")
