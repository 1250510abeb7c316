#!/usr/bin/env python
"""Django's command-line utility for OpenProgram Web."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")
    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(sys.argv)
    except KeyboardInterrupt:  # Ctrl-C at any moment, Django's start included: one line, not a traceback
        print(f"{' '.join(sys.argv[1:2]) or 'manage.py'}: interrupted (Ctrl-C)", file=sys.stderr)
        sys.exit(130)  # the shell's code for "ended by Ctrl-C"
