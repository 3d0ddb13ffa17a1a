"""One normaliser per architecture family: HF ``config.json`` → ``ModelSpec``."""
