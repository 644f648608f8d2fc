"""profreport's version, for what a module writes into a document (`profreport.__version__` is the
same string; modules below the package's facade read it from here)."""

__version__ = "0.1.0"
