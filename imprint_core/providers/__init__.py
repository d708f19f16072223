"""Providers: the scripted stub here, and `build_provider`, which builds a
provider with its counting from its spec; `local` and `remote` load lazily."""
from .build import RemoteSpec, ScriptedSpec, build_provider
from .scripted import ScriptedProvider, Turn, Chunk

__all__ = ["Chunk", "RemoteSpec", "ScriptedProvider", "ScriptedSpec", "Turn", "build_provider"]
