"""Providers: the scripted stub here, and `build_provider`, which builds a
provider with its counting from its spec; `local` and `remote` load lazily."""
from .build import LocalSpec, RemoteSpec, ScriptedSpec, build_provider
from .scripted import ScriptedProvider, Turn, Chunk

__all__ = ["Chunk", "LocalSpec", "RemoteSpec", "ScriptedProvider", "ScriptedSpec", "Turn", "build_provider"]
