"""The ``spillstore`` command line."""
