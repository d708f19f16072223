"""What `dtype: auto` loads: read from the CPU's declared flags, not probed."""
from __future__ import annotations

from imprint_core.providers.local import cpu_flags, resolve_dtype

_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu vme sse2 avx2 {extra}
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: fpu
"""


def test_auto_is_bfloat16_only_where_the_cpu_computes_it():
    assert resolve_dtype("auto", cpu_flags(_CPUINFO.format(extra="avx512_bf16"))) == "bfloat16"
    assert resolve_dtype("auto", cpu_flags(_CPUINFO.format(extra="amx_tile amx_bf16"))) == "bfloat16"
    assert resolve_dtype("auto", cpu_flags(_CPUINFO.format(extra="avx512f"))) == "float32"
    assert resolve_dtype("auto", frozenset()) == "float32"


def test_a_named_dtype_is_kept_whatever_the_cpu():
    for dtype in ("float32", "bfloat16", "int8"):
        assert resolve_dtype(dtype, frozenset()) == dtype


def test_the_first_flags_line_is_read_and_a_file_without_one_has_none():
    assert cpu_flags(_CPUINFO.format(extra="x")) == {"fpu", "vme", "sse2", "avx2", "x"}
    assert cpu_flags("processor : 0\n") == frozenset()
