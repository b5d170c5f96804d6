"""The configuration (docs/configuration.md): typed, validated before any work starts.

``load_config(path)`` reads a YAML file and returns a frozen ``Config``, or
raises ``ConfigError`` with one line that names the file, the YAML line and
the key path, e.g.::

    config.yaml line 7: phases[1].merges must be an integer >= 0, got 'abc' (a string)

The CLI maps ``ConfigError`` to exit code 2 (docs/cli.md). The package, one
step a module (each imports only those above it):

- ``schema``: the dataclasses, keys and bounds; reads no file.
- ``values``, ``sections``: the YAML's value checkers and section validators.
- ``vocab_size``: the phase without ``merges:`` gets the rest of ``vocab_size``.
- ``preflight``: the checks that need files: the warm start read (once) and
  recognised, its special tokens, ``vocab_size`` fitted to it, sources
  listed (``preflight(cfg)``, before any work).
- ``load``: ``load_config`` and ``check_settings``, the steps in order.
- ``fingerprint``: ``effective_settings`` and ``config_fingerprint``.

Safe YAML reading and the wording of errors are ``toktoktok.config_errors``'s.
This module is the public face: the names the rest of the project uses.
"""

from toktoktok.config_errors import config_error, format_key_path
from toktoktok.errors import ConfigError

from .fingerprint import config_fingerprint, effective_settings
from .load import check_settings, load_config
from .preflight import preflight
from .schema import (
    BOUNDS,
    MAX_MERGES,
    TOP_KEYS,
    Config,
    HfSettings,
    Phase,
    RayOptions,
    Source,
    WarmStart,
    default_work_dir,
    slugify,
)
from .vocab_size import new_special_tokens, resolve_vocab_size

__all__ = [
    "BOUNDS", "MAX_MERGES", "TOP_KEYS", "Config", "ConfigError", "HfSettings", "Phase", "RayOptions", "Source",
    "WarmStart", "check_settings", "config_error", "config_fingerprint", "default_work_dir", "effective_settings",
    "format_key_path", "load_config", "new_special_tokens", "preflight", "resolve_vocab_size", "slugify",
]  # fmt: skip
