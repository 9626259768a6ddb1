"""Zonda's own provider packages: operators, sensors and triggers that need more than the pure core."""
