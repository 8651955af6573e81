"""The promoter task: DNA sequence classification on the bundled benchmarks or your own labelled files."""
