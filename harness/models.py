"""Old path of `harness.live.model_folder`, kept only because
imprint_core/providers/local.py still imports it (removed by the core change)."""
from .live.model_folder import BUILD_COMMAND, ModelNotBuilt, ensure_model_dir

__all__ = ["BUILD_COMMAND", "ModelNotBuilt", "ensure_model_dir"]
