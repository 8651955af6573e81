"""The test suite, one folder per unit of the package (see ``tests/README.md``)."""
