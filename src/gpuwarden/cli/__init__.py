"""Command line: argument parsing, wiring, exit codes. Each verb is a thin module loaded lazily."""
