"""psnodes: the parameter-server cluster that pschaos puts under chaos.

It runs alone, as a product would: it never imports the harness.
"""
__version__ = "0.1.0"
