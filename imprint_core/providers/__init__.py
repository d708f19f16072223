"""Providers: the scripted stub here; `local` and `remote` load lazily."""
from .scripted import ScriptedProvider, Turn, Chunk

__all__ = ["ScriptedProvider", "Turn", "Chunk"]
