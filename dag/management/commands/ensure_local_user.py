"""`manage.py ensure_local_user`: create the local user on first start and print its password once."""
from django.core.management.base import BaseCommand

from dag.runs.local_user import credentials_file, ensure_local_user


class Command(BaseCommand):
    help = "Create a local user with a random password if no user exists yet (prints it once)."

    def handle(self, *args, **options):
        user, password = ensure_local_user()
        if password is not None:
            self.stdout.write(self.style.SUCCESS(
                f"Created the local user.\n  username: {user.get_username()}\n  password: {password}\n"
                f"(also saved, readable only by you, in {credentials_file()})"))
        elif user is not None:
            self.stdout.write(f"Local user: {user.get_username()} (its password is in {credentials_file()}"
                              f" if it was created here)")
        else:
            self.stdout.write("Users exist already; no local user was created.")
