"""Quantitative activity regression: DNA sequence → one or more measured activities (MPRA, expression)."""
