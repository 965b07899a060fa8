"""A courtesy for jobs that share a GPU by declared memory (``--mem``, ``lease(mem=...)``).

gpulane stops a job whose processes hold more GPU memory than it declared plus the machine's
margin (docs/security.md, "Declared memory"): that monitor is the guarantee. PyTorch can be told
the same limit, so that the job fails its own allocation first, with PyTorch's ordinary
out-of-memory error (which a training loop may catch), instead of being stopped from outside:
``torch.cuda.set_per_process_memory_fraction(declared / total, device)`` on each visible GPU.

It never starts CUDA itself: when torch is imported the call is queued with torch's own lazy
initialisation (it runs when CUDA starts, or at once when it already has); when torch is not
imported yet, it is queued as soon as torch is. The caching allocator's limit covers PyTorch's
tensors only, not the CUDA context nor other libraries' memory: a courtesy, not a wall.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any, Callable, Optional


def _apply(torch: Any, mem_bytes: int) -> None:
    cuda = torch.cuda
    for device in range(cuda.device_count()):
        total = int(cuda.get_device_properties(device).total_memory)
        if total > 0:
            cuda.set_per_process_memory_fraction(min(1.0, mem_bytes / total), device)


def _when_cuda_starts(torch: Any, mem_bytes: int) -> None:
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not hasattr(cuda, "set_per_process_memory_fraction"):
        return
    lazy = getattr(cuda, "_lazy_call", None)
    try:
        if callable(lazy):
            lazy(lambda: _apply(torch, mem_bytes))
        elif cuda.is_initialized():
            _apply(torch, mem_bytes)
    except Exception as e:  # a courtesy: never the reason a job fails
        sys.stderr.write(f"gpulane: could not limit PyTorch to the declared memory: {e}\n")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then(module)` once `name` has been imported (the first time)."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self._name, self._then, self._looking = name, then, False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self._name or self._looking:
            return None
        self._looking = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._looking = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module, finder = spec.loader.exec_module, self

        def exec_then(module: Any) -> None:
            exec_module(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            finder._then(module)

        spec.loader.exec_module = exec_then  # type: ignore[method-assign]
        return spec


def limit_torch_memory(mem_text: Optional[str]) -> None:
    """Asks PyTorch to keep to `mem_text` bytes (``GPULANE_MEM_BYTES``) on each GPU; no-op without."""
    if not mem_text or not mem_text.strip().isdigit():
        return
    mem_bytes = int(mem_text)
    torch = sys.modules.get("torch")
    if torch is not None:
        _when_cuda_starts(torch, mem_bytes)
        return
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport("torch", lambda module: _when_cuda_starts(module, mem_bytes)))
