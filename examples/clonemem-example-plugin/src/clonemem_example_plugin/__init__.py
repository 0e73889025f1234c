"""An example CloneMem plugin package (see README.md)."""
