"""The package version, in a module of its own: modules that print it (pipeline, cli) import it from here, not from
the package, whose lazy attributes lead back into them."""
__version__ = "0.1.0"
