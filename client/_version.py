"""kgroup's version, in a leaf module: the one place it is written.

pyproject.toml reads it (``[tool.setuptools.dynamic]``) for the package's
metadata. The protocol layer and the transport send it in ApiVersions;
importing it from the package root would make them import the whole front end
above them.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
