"""One module per verb, each with ``register(parser)`` and ``run(args) -> exit code``."""
