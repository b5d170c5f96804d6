"""The command line: ``entry`` (what must happen first) and ``app`` (the commands)."""
