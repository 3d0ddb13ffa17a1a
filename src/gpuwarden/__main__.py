from gpuwarden.cli.main import console

console()
