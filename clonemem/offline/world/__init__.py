"""The offline world generator: a seeded, lexicon-driven simulation of one person's life that
answers every generation stage from that stage's structured inputs."""
