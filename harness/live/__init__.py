"""What needs a real model or server: the local model folder, the two
OpenAI-compatible servers, and vcrpy cassettes (record and strict replay).
Nothing here knows scenario files."""
