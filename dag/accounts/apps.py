"""Django's admin app with this project's admin site (its login throttled: `admin_site`).

Apart from the module that names the site: INSTALLED_APPS imports this before any model can load,
and the site's module needs the auth forms, which need the models.
"""
from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig


class AdminConfig(DjangoAdminConfig):
    default_site = "dag.accounts.admin_site.ThrottledAdminSite"
