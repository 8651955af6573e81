"""The MSA task: contact prediction from a protein alignment (train, predict, pretrain and explain ``msa``)."""
