"""The export's old dotted path, kept because the README documented `dag.export.import_session`. Export and
import live in `dag.recording.export`."""
from .recording.export import EXPORT_VERSION, SessionImportError, export_session, import_session  # noqa: F401
