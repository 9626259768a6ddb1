"""The `zonda` command line (also `kubectl zonda`); `main.main` is the click group."""
