"""The `pschaos` command line: the parser and one module per verb."""
