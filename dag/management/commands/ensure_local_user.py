"""`manage.py ensure_local_user`: create the local user on first start and print its password once."""
from django.core.management.base import BaseCommand, CommandError

from dag.runs.local_user import LOCAL_USERNAME, credentials_file, ensure_local_user


class Command(BaseCommand):
    help = "Create a local user with a random password if no user exists yet (prints it once)."

    def add_arguments(self, parser):
        parser.add_argument("--address", default="",
                            help="the address the server answers on (e.g. http://127.0.0.1:8000/), printed "
                                 "beside the user and its password so a first start says where to log in")

    def handle(self, *args, **options):
        address = options["address"]
        try:
            user, password = ensure_local_user()
        except OSError as exc:
            raise CommandError(f"cannot save the local user's password to {credentials_file()} "
                               f"({exc.strerror or exc}), so no user was created; make that directory writable "
                               f"(or point OPENPROGRAM_VAR_DIR at one that is) and run this again") from None
        if password is not None:
            where = f" Open the address and log in:\n  open:     {address}" if address else ""
            self.stdout.write(self.style.SUCCESS(
                f"Created the local user.{where}\n"
                f"  username: {user.get_username()}\n  password: {password}\n"
                f"(also saved, readable only by you, in {credentials_file()})"))
        elif user is not None:
            self.stdout.write(self._where_the_password_is(user.get_username(), address))
        else:
            self.stdout.write(f"Open {address} and log in." if address else
                              "Users exist already; no local user was created.")

    @staticmethod
    def _where_the_password_is(username: str, address: str) -> str:
        path = credentials_file()
        if path.exists():
            if address:
                return f"Open {address} and log in as {username} (its password is in {path})"
            return f"Local user: {username} (its password is in {path})"
        return (f"Local user: {username} (its password is not saved: {path} is missing, or was removed "
                f"when the password was changed; `manage.py changepassword {LOCAL_USERNAME}` sets a new one)")
