"""The package's version, below every layer: the pipeline stamps reports with it, the faces show it."""

__version__ = "0.1.0"
