"""The ``intentvcs`` command line: the top floor of the product.

``main`` builds the parser from the command modules in ``commands`` (one per
subcommand); they parse options and call the floors below, importing heavy
libraries (torch, bentoml) only inside their run functions.
"""
