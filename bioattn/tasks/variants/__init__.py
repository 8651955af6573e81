"""Variant-effect scoring on top of any bioattn DNA model (reference vs alternative allele, saturation mutagenesis
maps) and the CAGI5 supervised protocol (a sparse linear variant-effect head on activity-model features)."""
