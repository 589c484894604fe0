"""Data: documents as lines, a text stream, token shards (and `prepare`), tokenizers, and the datasets a run draws its batches from."""
