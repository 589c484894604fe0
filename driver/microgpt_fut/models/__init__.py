"""The two model families' configs, tensor names and on-device models: microgpt and GPT-2."""
